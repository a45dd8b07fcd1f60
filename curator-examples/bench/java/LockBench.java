// Apache Curator 5.4's side of curator-bench's `lock` and `rwlock` scenarios (the harness's contract,
// ../shared/bench/README.md), so scripts/bench-scale can run both against one server.
//
// Usage: java LockBench --scenario lock|rwlock --connect HOST:PORT --path /bench/x [--clients 1]
//            [--cycles 1000] [--warmup 0] [--read-pct 90]
//
// N clients, each a CuratorFramework of its own (its own session) driven by a thread of its own,
// acquire and release one lock at <path>/lock (an InterProcessMutex) or <path>/rwlock (an
// InterProcessReadWriteLock; a cycle takes the read lock with probability read-pct, drawn from a
// per-client generator) with nothing held in between. W untimed cycles per client first, then all
// clients start the K timed cycles together. A sample is one acquire() call. For `lock`, a handoff
// runs from one holder's release() call to the next holder's acquire() returning (holds sorted by
// acquire time). cpu_us_per_op is this JVM's CPU time over the timed cycles, per cycle. Prints one
// JSON line.

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;

public class LockBench {
    static final String IMPL = "curator 5.4";

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        String scenario = args.getOrDefault("scenario", "lock");
        if (!scenario.equals("lock") && !scenario.equals("rwlock")) {
            System.err.println("LockBench: unsupported scenario " + scenario);
            System.exit(3);
        }
        boolean rw = scenario.equals("rwlock");
        String connect = args.getOrDefault("connect", "127.0.0.1:2181");
        String base = args.getOrDefault("path", "/bench/java-" + Long.toString(System.nanoTime(), 36));
        int n = Math.max(1, Integer.parseInt(args.getOrDefault("clients", "1")));
        int k = Integer.parseInt(args.getOrDefault("cycles", "1000"));
        int warm = Integer.parseInt(args.getOrDefault("warmup", "0"));
        int readPct = Math.min(100, Integer.parseInt(args.getOrDefault("read-pct", "90")));
        String lockPath = base + (rw ? "/rwlock" : "/lock");

        CuratorFramework[] clients = new CuratorFramework[n];
        for (int i = 0; i < n; i++) clients[i] = client(connect);
        clients[0].create().orSetData().creatingParentsIfNeeded().withMode(CreateMode.PERSISTENT).forPath(base);

        long[] latency = new long[n * k], acquired = new long[n * k], releasing = new long[n * k];
        boolean[] read = new boolean[n * k];
        CyclicBarrier start = new CyclicBarrier(n + 1);
        Throwable[] failure = new Throwable[1];
        List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < n; c++) {
            final int ci = c;
            Thread t = new Thread(() -> {
                try {
                    InterProcessMutex mutex = rw ? null : new InterProcessMutex(clients[ci], lockPath);
                    InterProcessReadWriteLock rwLock = rw ? new InterProcessReadWriteLock(clients[ci], lockPath) : null;
                    Random random = new Random(ci);
                    for (int j = 0; j < warm; j++) {
                        InterProcessLock lock = rw ? (random.nextInt(100) < readPct ? rwLock.readLock() : rwLock.writeLock()) : mutex;
                        lock.acquire();
                        lock.release();
                    }
                    start.await();
                    for (int j = 0; j < k; j++) {
                        int x = ci * k + j;
                        read[x] = rw && random.nextInt(100) < readPct;
                        InterProcessLock lock = rw ? (read[x] ? rwLock.readLock() : rwLock.writeLock()) : mutex;
                        long t0 = System.nanoTime();
                        lock.acquire();
                        acquired[x] = System.nanoTime();
                        latency[x] = acquired[x] - t0;
                        releasing[x] = System.nanoTime();
                        lock.release();
                    }
                } catch (Throwable e) {
                    synchronized (failure) {
                        failure[0] = e;
                    }
                    start.reset();
                }
            });
            t.start();
            threads.add(t);
        }
        start.await();
        long cpu0 = cpuNanos();
        long t0 = System.nanoTime();
        for (Thread t : threads) t.join();
        double seconds = (System.nanoTime() - t0) / 1e9;
        long cpu = cpuNanos() - cpu0;
        if (failure[0] != null) throw new IllegalStateException("a client failed", failure[0]);

        long ops = (long) n * k;
        StringBuilder extra = new StringBuilder();
        extra.append(String.format(Locale.ROOT, ",\"cpu_us_per_op\":%.1f", cpu / 1e3 / Math.max(1, ops)));
        if (rw) {
            long reads = 0;
            for (boolean b : read) if (b) reads++;
            long[] r = new long[(int) reads], w = new long[(int) (ops - reads)];
            int ri = 0, wi = 0;
            for (int x = 0; x < ops; x++) {
                if (read[x]) r[ri++] = latency[x];
                else w[wi++] = latency[x];
            }
            Arrays.sort(r);
            Arrays.sort(w);
            extra.append(String.format(Locale.ROOT, ",\"read_p50_us\":%s,\"write_p50_us\":%s,\"reads\":%d,\"writes\":%d",
                    r.length > 0 ? BenchStats.us(BenchStats.pct(r, 50)) : "0", w.length > 0 ? BenchStats.us(BenchStats.pct(w, 50)) : "0",
                    r.length, w.length));
        } else if (n > 1) {
            long[] gaps = handoffs(acquired, releasing);
            extra.append(String.format(Locale.ROOT, ",\"handoff_p50_us\":%s,\"handoff_p99_us\":%s",
                    BenchStats.us(BenchStats.pct(gaps, 50)), BenchStats.us(BenchStats.pct(gaps, 99))));
        }
        long[] sorted = latency.clone();
        Arrays.sort(sorted);
        System.out.println(String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"%s\",\"clients\":%d,\"ops\":%d,\"ops_per_s\":%.1f,\"p50_us\":%s,\"p99_us\":%s%s}",
                IMPL, scenario, n, ops, ops / seconds, ops > 0 ? BenchStats.us(BenchStats.pct(sorted, 50)) : "0",
                ops > 0 ? BenchStats.us(BenchStats.pct(sorted, 99)) : "0", extra));
        System.out.flush();
        for (CuratorFramework c : clients) c.close();
    }

    /** This JVM's CPU time in nanoseconds (user and system), or 0 where the platform hides it. */
    static long cpuNanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean ? ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() : 0;
    }

    /** Gaps from a release() call to the next acquire() return, holds in acquire order. */
    static long[] handoffs(long[] acquired, long[] releasing) {
        Integer[] order = new Integer[acquired.length];
        for (int i = 0; i < order.length; i++) order[i] = i;
        Arrays.sort(order, (a, b) -> Long.compare(acquired[a], acquired[b]));
        long[] gaps = new long[Math.max(0, order.length - 1)];
        int g = 0;
        for (int i = 1; i < order.length; i++) {
            long gap = acquired[order[i]] - releasing[order[i - 1]];
            if (gap >= 0) gaps[g++] = gap;
        }
        long[] out = Arrays.copyOf(gaps, Math.max(1, g));
        Arrays.sort(out);
        return out;
    }

    static CuratorFramework client(String connect) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 30000, 15000, new ExponentialBackoffRetry(100, 5));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
        return client;
    }
}
