// Apache Curator 5.4's side of curator-bench's `atomic_increments` scenario: the same counter, the
// same retry policy, the same timing, the same JSON line, so scripts/bench-atomic can run both
// against one server.
//
// Usage: java AtomicBench --connect HOST:PORT --path /bench/x [--sessions 1] [--increments 1000]
//                         [--seconds D] [--warmup-increments 20] [--retry-times 20] [--retry-sleep-ms 1]
//
// S sessions (threads), each a CuratorFramework of its own with its own DistributedAtomicLong
// (optimistic mode, RetryNTimes(N, M ms)) on <path>/counter, which the first session initializes
// to 0. Each makes W untimed increments, then, once all are ready, all start together and each
// makes I increments one after the other (or increments for D seconds). A sample is one
// increment() call, successful or not; ops and ops_per_s count the successful increments over
// the wall time from the common start to the last session's end. Also printed: failed increments,
// optimistic tries (AtomicStats) in all and per increment, the server's requests per successful
// increment (zk_packets_received through mntr, read once the server is quiet before the start and
// after the end), and a correctness check (the counter moved by exactly the successes, whose
// post-values are distinct and fill that range); a failed check exits 1. Prints one JSON line.

import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

public class AtomicBench {
    static final String IMPL = "curator 5.4";

    /** What one session's timed phase did. */
    static final class Session {
        long[] latencies = new long[1024];
        long[] posts = new long[1024];
        int calls, successes;
        long failed, tries, warmSuccesses;

        void add(long latency, AtomicValue<Long> value) {
            if (calls == latencies.length) latencies = Arrays.copyOf(latencies, calls * 2);
            latencies[calls++] = latency;
            tries += value.getStats().getOptimisticTries();
            if (value.succeeded()) {
                if (successes == posts.length) posts = Arrays.copyOf(posts, successes * 2);
                posts[successes++] = value.postValue();
            } else {
                failed++;
            }
        }
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String scenario = args.getOrDefault("scenario", "atomic_increments");
        if (!scenario.equals("atomic_increments")) {
            System.err.println("AtomicBench: unsupported scenario " + scenario);
            System.exit(3);
        }
        String connect = args.getOrDefault("connect", "127.0.0.1:2181");
        String path = args.getOrDefault("path", "/bench/java-" + Long.toString(System.nanoTime(), 36)) + "/counter";
        int sessions = Math.max(1, Integer.parseInt(args.getOrDefault("sessions", "1")));
        int increments = Math.max(1, Integer.parseInt(args.getOrDefault("increments", "1000")));
        double seconds = Double.parseDouble(args.getOrDefault("seconds", "0"));
        int warmup = Math.max(0, Integer.parseInt(args.getOrDefault("warmup-increments", "20")));
        int retryTimes = Integer.parseInt(args.getOrDefault("retry-times", "20"));
        int retrySleepMs = Integer.parseInt(args.getOrDefault("retry-sleep-ms", "1"));

        CuratorFramework[] clients = new CuratorFramework[sessions];
        for (int i = 0; i < sessions; i++) clients[i] = client(connect);
        DistributedAtomicLong observer = new DistributedAtomicLong(clients[0], path, new RetryNTimes(retryTimes, retrySleepMs));
        observer.initialize(0L);

        CyclicBarrier ready = new CyclicBarrier(sessions + 1), start = new CyclicBarrier(sessions + 1);
        Session[] done = new Session[sessions];
        Thread[] threads = new Thread[sessions];
        AtomicReference<Throwable> failure = new AtomicReference<>();
        for (int i = 0; i < sessions; i++) {
            Session s = done[i] = new Session();
            DistributedAtomicLong counter = new DistributedAtomicLong(clients[i], path, new RetryNTimes(retryTimes, retrySleepMs));
            threads[i] = new Thread(() -> {
                try {
                    for (int k = 0; k < warmup; k++) {
                        if (counter.increment().succeeded()) s.warmSuccesses++;
                    }
                    ready.await();
                    start.await();
                    long deadline = seconds > 0 ? System.nanoTime() + (long) (seconds * 1e9) : Long.MAX_VALUE;
                    for (int k = 0; seconds > 0 ? System.nanoTime() < deadline : k < increments; k++) {
                        long t0 = System.nanoTime();
                        AtomicValue<Long> value = counter.increment();
                        s.add(System.nanoTime() - t0, value);
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                    ready.reset(); // wakes the main thread: the run has failed
                    start.reset();
                }
            }, "session-" + i);
            threads[i].start();
        }
        ready.await(120, TimeUnit.SECONDS);
        long before = observer.get().postValue();
        long p0 = BenchStats.quietPackets(connect);
        start.await(30, TimeUnit.SECONDS);
        long t0 = System.nanoTime();
        for (Thread t : threads) t.join();
        long wall = System.nanoTime() - t0;
        if (failure.get() != null) throw new IllegalStateException("a session failed", failure.get());
        long p1 = BenchStats.quietPackets(connect);
        long after = observer.get().postValue();

        long warmSuccesses = 0, failed = 0, tries = 0;
        int calls = 0, successes = 0;
        for (Session s : done) {
            warmSuccesses += s.warmSuccesses;
            failed += s.failed;
            tries += s.tries;
            calls += s.calls;
            successes += s.successes;
        }
        long[] latencies = new long[calls], posts = new long[successes];
        int c = 0, p = 0;
        for (Session s : done) {
            System.arraycopy(s.latencies, 0, latencies, c, s.calls);
            System.arraycopy(s.posts, 0, posts, p, s.successes);
            c += s.calls;
            p += s.successes;
        }
        Arrays.sort(latencies);
        Arrays.sort(posts);
        boolean filled = true;
        for (int k = 0; k < posts.length; k++) filled &= posts[k] == before + 1 + k;
        boolean correct = before == warmSuccesses && after - before == successes && filled;

        double wallSeconds = wall / 1e9;
        double requests = p1 - p0;
        String line = String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"atomic_increments\",\"clients\":%d,\"ops\":%d,\"ops_per_s\":%.1f,"
                        + "\"p50_us\":%s,\"p99_us\":%s,\"sessions\":%d,\"increments\":%d,\"succeeded\":%d,\"failed\":%d,"
                        + "\"tries\":%d,\"tries_per_increment\":%.3f,\"requests_per_increment\":%.2f,"
                        + "\"retry\":\"RetryNTimes(%d, %d ms)\",\"value_before\":%d,\"value_after\":%d,\"correct\":%b,\"wall_s\":%.3f}",
                IMPL, sessions, successes, successes / wallSeconds,
                BenchStats.us(BenchStats.pct(latencies, 50)), BenchStats.us(BenchStats.pct(latencies, 99)),
                sessions, calls, successes, failed, tries, calls > 0 ? tries / (double) calls : 0.0,
                successes > 0 ? requests / successes : 0.0, retryTimes, retrySleepMs, before, after, correct, wallSeconds);
        for (CuratorFramework client : clients) client.close();
        if (!correct) {
            System.err.println("AtomicBench: the counter is wrong: " + line);
            System.exit(1);
        }
        System.out.println(line);
        System.out.flush();
    }

    static CuratorFramework client(String connect) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 30000, 15000, new ExponentialBackoffRetry(100, 5));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
        return client;
    }
}
