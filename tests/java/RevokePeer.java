// Interop peer for revoking read/write lock holders: Apache Curator 5.x's own
// InterProcessReadWriteLock halves, made revocable, and Curator's Revoker, on the same path as
// Rust clients.
//
// Usage: java RevokePeer <connect> <path>
// Prints READY once connected, then answers each line of stdin with one line:
//   HOLD read|write   makes that half of a new InterProcessReadWriteLock on <path> revocable and
//                     takes it on a thread of its own, which releases it once the revocation
//                     listener is called; answers "HELD <half> <node path>"
//   REVOKE <node>     Revoker.attemptRevoke(client, node); answers "REVOKED <node>"
//   QUIT              answers BYE and exits
// A command that fails answers "ERROR <message>". Besides the answers, it prints at any time
//   ASKED <half>      when the half's revocation listener is called
//   RELEASED <half>   when the holding thread has released it after that

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class RevokePeer {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        CuratorFramework client =
                CuratorFrameworkFactory.newClient(connect, 10000, 5000, new ExponentialBackoffRetry(100, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection");
        say("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("QUIT")) break;
            try {
                switch (words[0]) {
                    case "HOLD": say("HELD " + words[1] + " " + hold(client, path, words[1])); break;
                    case "REVOKE": Revoker.attemptRevoke(client, words[1]); say("REVOKED " + words[1]); break;
                    default: throw new IllegalArgumentException("unknown command: " + line);
                }
            } catch (Exception e) {
                say("ERROR " + e);
            }
        }
        client.close();
        say("BYE");
    }

    /// Takes the half on a thread that releases it once asked to; returns the held node's path.
    static String hold(CuratorFramework client, String path, String half) throws Exception {
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        InterProcessMutex lock = half.equals("read") ? rw.readLock() : rw.writeLock();
        CountDownLatch asked = new CountDownLatch(1);
        lock.makeRevocable(l -> {
            say("ASKED " + half);
            asked.countDown();
        });
        CountDownLatch held = new CountDownLatch(1);
        Thread holder = new Thread(() -> {
            try {
                lock.acquire();
                held.countDown();
                asked.await();
                lock.release(); // by the thread that holds it, as Curator requires
                say("RELEASED " + half);
            } catch (Exception e) {
                say("FAILED " + half + " " + e);
            }
        });
        holder.setDaemon(true);
        holder.start();
        if (!held.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("not held in time");
        return lock.getParticipantNodes().iterator().next();
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
