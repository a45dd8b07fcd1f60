// Interop peer for the Rust lock tests: Apache Curator 5.x's own InterProcessMutex,
// InterProcessReadWriteLock and InterProcessSemaphoreMutex on the same path as the Rust clients,
// and InterProcessSemaphoreV2 sized by a SharedCount at <path>-count (seeded 1 if missing).
//
// Usage: java LockPeer <connect> <mutex|rw|semaphore|semaphore-count> <path> <cycles> <holdMicros>
// Prints READY once connected, waits for a line on stdin, then runs the cycles and prints,
// for each hold, "HOLD <X|R|W> <startMicros> <endMicros>" with times since the epoch
// read while holding, then DONE.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Instant;
import java.util.Random;
import java.util.concurrent.locks.LockSupport;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class LockPeer {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String mode = args[1];
        String path = args[2];
        int cycles = Integer.parseInt(args[3]);
        long holdMicros = Long.parseLong(args[4]);

        CuratorFramework client =
                CuratorFrameworkFactory.newClient(connect, 10000, 5000, new ExponentialBackoffRetry(100, 10));
        client.start();
        client.blockUntilConnected();
        System.out.println("READY");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();

        Random random = new Random(7);
        InterProcessMutex mutex = new InterProcessMutex(client, path);
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        InterProcessSemaphoreMutex semaphore = new InterProcessSemaphoreMutex(client, path);
        StringBuilder out = new StringBuilder();
        if (mode.equals("semaphore-count")) {
            SharedCount count = new SharedCount(client, path + "-count", 1);
            count.start();
            InterProcessSemaphoreV2 sized = new InterProcessSemaphoreV2(client, path, count);
            for (int i = 0; i < cycles; i++) {
                Lease lease = sized.acquire();
                long start = micros();
                if (holdMicros > 0) {
                    LockSupport.parkNanos(holdMicros * 1000);
                }
                long end = micros();
                sized.returnLease(lease);
                out.append("HOLD X ").append(start).append(' ').append(end).append('\n');
            }
            count.close();
            cycles = 0;
        }
        for (int i = 0; i < cycles; i++) {
            String kind;
            InterProcessLock lock;
            if (mode.equals("mutex")) {
                kind = "X";
                lock = mutex;
            } else if (mode.equals("semaphore")) {
                kind = "X";
                lock = semaphore;
            } else if (random.nextInt(10) < 7) {
                kind = "R";
                lock = rw.readLock();
            } else {
                kind = "W";
                lock = rw.writeLock();
            }
            lock.acquire();
            long start = micros();
            if (holdMicros > 0) {
                LockSupport.parkNanos(holdMicros * 1000);
            }
            long end = micros();
            lock.release();
            out.append("HOLD ").append(kind).append(' ').append(start).append(' ').append(end).append('\n');
        }
        client.close();
        System.out.print(out);
        System.out.println("DONE");
        System.out.flush();
    }

    private static long micros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
    }
}
