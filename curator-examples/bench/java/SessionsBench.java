// Apache Curator 5.4's side of curator-bench's `sessions` scenario (issue 30): many frameworks in
// one process, the same steps, the same JSON line, so the scale driver can run both against one
// server.
//
// Usage: java SessionsBench --scenario sessions --connect HOST:PORT --path /bench/x [--clients 10]
//
// N CuratorFrameworks (each its own session) are brought up, at most 64 at a time (curator-bench
// follows the same rule): each connects (a connect sample runs from just before start() to the
// return of blockUntilConnected), acquires an InterProcessMutex of its own (<path>/locks/<i>: each
// holds a lock node at once) and starts a NodeCache on <path>/node with its initial build. The
// pool that brought them up is shut down, then the process settles (thread count and resident
// memory unchanged for 500 ms, at most 15 s) and reads, after System.gc(), its resident memory
// (VmRSS), used heap and thread count (/proc/self/status), as deltas over N from the readings
// taken before the first framework was built. Prints one JSON line, then closes everything (the
// lock nodes, ephemeral, go with the sessions: Curator's mutex is released only by the thread that
// acquired it).

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.NodeCache;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;

@SuppressWarnings("deprecation")
public class SessionsBench {
    static final String IMPL = "curator 5.4";
    /** How many frameworks are brought up at once. */
    static final int CONNECT_WINDOW = 64;

    /** One framework as the scenario holds it. */
    static final class Held {
        CuratorFramework client;
        InterProcessMutex mutex;
        NodeCache cache;
        long connectNs;
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String scenario = args.getOrDefault("scenario", "sessions");
        if (!scenario.equals("sessions")) {
            System.err.println("SessionsBench: unsupported scenario " + scenario);
            System.exit(3);
        }
        String connect = args.getOrDefault("connect", "127.0.0.1:2181");
        String path = args.getOrDefault("path", "/bench/java-" + Long.toString(System.nanoTime(), 36));
        int n = Math.max(1, Integer.parseInt(args.getOrDefault("clients", "10")));
        String node = path + "/node";

        CuratorFramework setup = client(connect);
        setup.start();
        if (!setup.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
        setup.create().orSetData().creatingParentsIfNeeded().withMode(CreateMode.PERSISTENT).forPath(node, "x".getBytes(StandardCharsets.UTF_8));
        setup.close();
        long[] before = settle();

        ExecutorService pool = Executors.newFixedThreadPool(CONNECT_WINDOW);
        List<Future<Held>> pending = new ArrayList<>();
        long started = System.nanoTime();
        for (int i = 0; i < n; i++) {
            final int which = i;
            pending.add(pool.submit(() -> up(connect, path, node, which)));
        }
        List<Held> held = new ArrayList<>();
        for (Future<Held> f : pending) held.add(f.get());
        long connectAll = System.nanoTime() - started;
        pool.shutdown();
        if (!pool.awaitTermination(30, TimeUnit.SECONDS)) throw new IllegalStateException("the connect pool did not end");
        long[] after = settle();

        long[] connects = new long[n];
        for (int i = 0; i < n; i++) connects[i] = held.get(i).connectNs;
        Arrays.sort(connects);
        String p50 = BenchStats.us(BenchStats.pct(connects, 50)), p99 = BenchStats.us(BenchStats.pct(connects, 99));
        System.out.println(String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"sessions\",\"clients\":%d,\"ops\":%d,\"ops_per_s\":%.1f,"
                        + "\"p50_us\":%s,\"p99_us\":%s,\"connect_p50_us\":%s,\"connect_p99_us\":%s,\"connect_all_us\":%s,"
                        + "\"connect_window\":%d,\"rss_bytes_per_client\":%.0f,\"rss_before_bytes\":%d,\"rss_after_bytes\":%d,"
                        + "\"heap_bytes_per_client\":%.0f,\"threads\":%d,\"threads_before\":%d,\"threads_per_client\":%.3f}",
                IMPL, n, n, n / (connectAll / 1e9), p50, p99, p50, p99, BenchStats.us(connectAll), CONNECT_WINDOW,
                (after[0] - before[0]) / (double) n, before[0], after[0], (after[2] - before[2]) / (double) n,
                after[1], before[1], (after[1] - before[1]) / (double) n));
        System.out.flush();

        ExecutorService closer = Executors.newFixedThreadPool(CONNECT_WINDOW);
        List<Future<?>> closing = new ArrayList<>();
        for (Held h : held) {
            closing.add(closer.submit(() -> {
                // Curator's InterProcessMutex is released only by the thread that acquired it (gone with
                // the pool): the lock node, ephemeral, goes with the session.
                h.cache.close();
                h.client.close();
                return null;
            }));
        }
        for (Future<?> f : closing) f.get();
        closer.shutdown();
    }

    static CuratorFramework client(String connect) {
        return CuratorFrameworkFactory.newClient(connect, 30000, 15000, new ExponentialBackoffRetry(100, 5));
    }

    /** Framework i: connects, takes its lock, starts its cache. */
    static Held up(String connect, String path, String node, int i) throws Exception {
        Held h = new Held();
        h.client = client(connect);
        long t0 = System.nanoTime();
        h.client.start();
        if (!h.client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
        h.connectNs = System.nanoTime() - t0;
        h.mutex = new InterProcessMutex(h.client, String.format(Locale.ROOT, "%s/locks/%05d", path, i));
        h.mutex.acquire();
        h.cache = new NodeCache(h.client, node);
        h.cache.start(true);
        return h;
    }

    /** {VmRSS bytes, Threads, used heap bytes} once threads and memory have been steady for 500 ms (at most 15 s). */
    static long[] settle() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        long[] last = reading();
        long since = System.nanoTime();
        while (true) {
            Thread.sleep(100); // the poll interval
            long[] now = reading();
            if (now[1] != last[1] || Math.abs(now[0] - last[0]) > 64 * 1024) {
                last = now;
                since = System.nanoTime();
            } else if (System.nanoTime() - since >= TimeUnit.MILLISECONDS.toNanos(500)) {
                return now;
            }
            if (System.nanoTime() > deadline) return now;
        }
    }

    /** {VmRSS bytes, Threads, used heap bytes}, after a System.gc(). */
    static long[] reading() throws Exception {
        System.gc();
        Runtime rt = Runtime.getRuntime();
        long heap = rt.totalMemory() - rt.freeMemory();
        long rss = 0, threads = 0;
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"), StandardCharsets.UTF_8)) {
            String[] kv = line.split("\\s+");
            if (kv[0].equals("VmRSS:")) rss = Long.parseLong(kv[1]) * 1024;
            if (kv[0].equals("Threads:")) threads = Long.parseLong(kv[1]);
        }
        return new long[] {rss, threads, heap};
    }
}
