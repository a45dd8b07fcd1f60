// Interop peer for the Rust atomic and shared count tests: Apache Curator 5.x's own
// DistributedAtomicLong, DistributedAtomicInteger and SharedCount on the same paths as the Rust
// clients.
//
// Usage: java AtomicPeer <connect>
// Connects one client (for the one-shot commands and the SharedCount), prints READY, then
// answers each line of stdin:
//   INCREMENT <long|int> <path> <threads> <count> <retries> <sleepMs> [<lockPath> <lockRetries> <lockSleepMs>]
//       connects one client (its own session) per thread, answers STARTED, then each thread
//       increments <count> times with RetryNTimes(<retries>, <sleepMs>), promoted to a mutex on
//       <lockPath> (lock tries under RetryNTimes(<lockRetries>, <lockSleepMs>), 30 s to get it)
//       when given. Once all are done it prints, per increment,
//         INC <thread> <pre> <post> <optimisticTries> <promotedLockTries>   (succeeded)
//         MISS <thread> <pre> <optimisticTries> <promotedLockTries>         (did not succeed)
//       then "DONE <succeeded> <failed>".
//   GET <long|int> <path>             "VALUE <n>" from get()
//   ADD <long|int> <path> <delta>     "ADDED <succeeded> <pre> <post>" from add()
//   TRYSET <long|int> <path> <value>  "TRYSET <succeeded> <pre> <post>" from trySet()
//   COUNT_OPEN <path> <seed>          starts a SharedCount; "OPENED <count> <version>"
//   COUNT_SET <n>                     setCount(n); "COUNT_SET"
//   COUNT_GET                         "COUNT <getCount()> <version> <value>" (getVersionedValue())
//   COUNT_SNAPSHOT <name>             keeps getVersionedValue() as <name>; "SNAPSHOT <name> <version> <value>"
//   COUNT_TRYSET <name> <n>           trySetCount(<name>'s value, n); "TRIED <true|false>"
//   QUIT                              closes everything, answers BYE and exits
// A command that fails answers "ERROR <exception>". Besides the answers, it prints at any time
//   CHANGED <count>                   what the SharedCount's listener hears (countHasChanged)
// Atomic numbers use RetryNTimes(10, 10) outside INCREMENT.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.RetryPolicy;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicInteger;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicNumber;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.SharedCountListener;
import org.apache.curator.framework.recipes.shared.SharedCountReader;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

public class AtomicPeer {
    static String connect;

    public static void main(String[] args) throws Exception {
        connect = args[0];
        CuratorFramework client = newClient();
        SharedCount count = null;
        Map<String, VersionedValue<Integer>> snapshots = new HashMap<>();
        say("READY");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("QUIT")) break;
            try {
                switch (w[0]) {
                    case "INCREMENT": increment(w); break;
                    case "GET": say("VALUE " + number(client, w[1], w[2], new RetryNTimes(10, 10)).get().postValue()); break;
                    case "ADD": {
                        DistributedAtomicNumber<?> n = number(client, w[1], w[2], new RetryNTimes(10, 10));
                        AtomicValue<?> v = w[1].equals("int")
                                ? ((DistributedAtomicInteger) n).add(Integer.valueOf(w[3]))
                                : ((DistributedAtomicLong) n).add(Long.valueOf(w[3]));
                        say("ADDED " + v.succeeded() + " " + v.preValue() + " " + v.postValue());
                        break;
                    }
                    case "TRYSET": {
                        DistributedAtomicNumber<?> n = number(client, w[1], w[2], new RetryNTimes(10, 10));
                        AtomicValue<?> v = w[1].equals("int")
                                ? ((DistributedAtomicInteger) n).trySet(Integer.valueOf(w[3]))
                                : ((DistributedAtomicLong) n).trySet(Long.valueOf(w[3]));
                        say("TRYSET " + v.succeeded() + " " + v.preValue() + " " + v.postValue());
                        break;
                    }
                    case "COUNT_OPEN": {
                        if (count != null) throw new IllegalStateException("a count is open already");
                        count = new SharedCount(client, w[1], Integer.parseInt(w[2]));
                        count.addListener(new SharedCountListener() {
                            @Override
                            public void countHasChanged(SharedCountReader reader, int newCount) {
                                say("CHANGED " + newCount);
                            }

                            @Override
                            public void stateChanged(CuratorFramework c, ConnectionState state) {}
                        });
                        count.start();
                        VersionedValue<Integer> v = count.getVersionedValue();
                        say("OPENED " + v.getValue() + " " + v.getVersion());
                        break;
                    }
                    case "COUNT_SET": open(count).setCount(Integer.parseInt(w[1])); say("COUNT_SET"); break;
                    case "COUNT_GET": {
                        VersionedValue<Integer> v = open(count).getVersionedValue();
                        say("COUNT " + count.getCount() + " " + v.getVersion() + " " + v.getValue());
                        break;
                    }
                    case "COUNT_SNAPSHOT": {
                        VersionedValue<Integer> v = open(count).getVersionedValue();
                        snapshots.put(w[1], v);
                        say("SNAPSHOT " + w[1] + " " + v.getVersion() + " " + v.getValue());
                        break;
                    }
                    case "COUNT_TRYSET": {
                        VersionedValue<Integer> previous = snapshots.get(w[1]);
                        if (previous == null) throw new IllegalArgumentException("no snapshot " + w[1]);
                        say("TRIED " + open(count).trySetCount(previous, Integer.parseInt(w[2])));
                        break;
                    }
                    default: throw new IllegalArgumentException("unknown command: " + line);
                }
            } catch (Exception e) {
                say("ERROR " + e);
            }
        }
        if (count != null) count.close();
        client.close();
        say("BYE");
    }

    static CuratorFramework newClient() throws InterruptedException {
        CuratorFramework client =
                CuratorFrameworkFactory.newClient(connect, 10000, 5000, new ExponentialBackoffRetry(100, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection");
        return client;
    }

    static SharedCount open(SharedCount count) {
        if (count == null) throw new IllegalStateException("no count open (COUNT_OPEN)");
        return count;
    }

    static DistributedAtomicNumber<?> number(CuratorFramework client, String kind, String path, RetryPolicy retry) {
        return number(client, kind, path, retry, null);
    }

    static DistributedAtomicNumber<?> number(
            CuratorFramework client, String kind, String path, RetryPolicy retry, PromotedToLock promoted) {
        switch (kind) {
            case "long":
                return promoted == null
                        ? new DistributedAtomicLong(client, path, retry)
                        : new DistributedAtomicLong(client, path, retry, promoted);
            case "int":
                return promoted == null
                        ? new DistributedAtomicInteger(client, path, retry)
                        : new DistributedAtomicInteger(client, path, retry, promoted);
            default:
                throw new IllegalArgumentException("want long or int, not " + kind);
        }
    }

    /** The INCREMENT command: threads with a session each, all starting together. */
    static void increment(String[] w) throws Exception {
        String kind = w[1];
        String path = w[2];
        int threads = Integer.parseInt(w[3]);
        int count = Integer.parseInt(w[4]);
        int retries = Integer.parseInt(w[5]);
        int sleepMs = Integer.parseInt(w[6]);
        PromotedToLock promoted = w.length > 7
                ? PromotedToLock.builder()
                        .lockPath(w[7])
                        .retryPolicy(new RetryNTimes(Integer.parseInt(w[8]), Integer.parseInt(w[9])))
                        .timeout(30, TimeUnit.SECONDS)
                        .build()
                : null;
        List<CuratorFramework> clients = new ArrayList<>();
        for (int t = 0; t < threads; t++) clients.add(newClient());
        CountDownLatch go = new CountDownLatch(1);
        List<StringBuilder> outs = new ArrayList<>();
        int[] succeeded = new int[threads];
        int[] failed = new int[threads];
        AtomicReference<Exception> error = new AtomicReference<>();
        List<Thread> running = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int id = t;
            StringBuilder out = new StringBuilder();
            outs.add(out);
            DistributedAtomicNumber<?> number =
                    number(clients.get(t), kind, path, new RetryNTimes(retries, sleepMs), promoted);
            Thread thread = new Thread(() -> {
                try {
                    go.await();
                    for (int i = 0; i < count; i++) {
                        AtomicValue<?> v = number.increment();
                        int opt = v.getStats().getOptimisticTries();
                        int lock = v.getStats().getPromotedLockTries();
                        if (v.succeeded()) {
                            succeeded[id]++;
                            out.append("INC ").append(id).append(' ').append(v.preValue()).append(' ')
                                    .append(v.postValue()).append(' ').append(opt).append(' ').append(lock)
                                    .append('\n');
                        } else {
                            failed[id]++;
                            out.append("MISS ").append(id).append(' ').append(v.preValue()).append(' ')
                                    .append(opt).append(' ').append(lock).append('\n');
                        }
                    }
                } catch (Exception e) {
                    error.compareAndSet(null, e);
                }
            });
            thread.start();
            running.add(thread);
        }
        say("STARTED");
        go.countDown();
        for (Thread thread : running) thread.join();
        for (CuratorFramework c : clients) c.close();
        if (error.get() != null) throw error.get();
        int ok = 0;
        int missed = 0;
        StringBuilder all = new StringBuilder();
        for (int t = 0; t < threads; t++) {
            all.append(outs.get(t));
            ok += succeeded[t];
            missed += failed[t];
        }
        synchronized (AtomicPeer.class) {
            System.out.print(all);
            System.out.println("DONE " + ok + " " + missed);
            System.out.flush();
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
