// Apache Curator 5.4's side of curator-bench's `leader_failover` scenario: the same election, the
// same timing, the same JSON line, so scripts/bench-leader can run both against one server.
//
// Usage: java LeaderBench --connect HOST:PORT --path /bench/x [--participants 2] [--handoffs 100]
//
// N participants (ids p-<i>), each a LeaderLatch on a CuratorFramework of its own (its own
// session), join <path>/election one after the other, so p-0 leads first. Then, H times: the
// leader closes its latch; a sample runs from just before close() to the moment the next
// participant's LeaderLatchListener.isLeader() runs. The closed participant then rejoins with a
// new LeaderLatch on the same client (at the end of the line), so N take part in every handoff.
// Server requests per handoff: the server's zk_packets_received (the mntr four-letter word) once
// the server has been quiet for 10 ms before the close, and again once it is quiet after the
// new leader's callback (less the mntr readings, which the server counts too); the rejoin falls
// outside. Requests per cycle count the rejoin too: from the same reading to one once the server is
// quiet after the rejoin (which also keeps the rejoin's requests out of the next handoff's count).
// Prints one JSON line.

import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;

public class LeaderBench {
    static final String IMPL = "curator 5.4";

    /** Becoming leader, as a listener saw it: {participant, System.nanoTime()}. */
    static final LinkedBlockingQueue<long[]> ELECTED = new LinkedBlockingQueue<>();

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String scenario = args.getOrDefault("scenario", "leader_failover");
        if (!scenario.equals("leader_failover")) {
            System.err.println("LeaderBench: unsupported scenario " + scenario);
            System.exit(3);
        }
        String connect = args.getOrDefault("connect", "127.0.0.1:2181");
        String dir = args.getOrDefault("path", "/bench/java-" + Long.toString(System.nanoTime(), 36)) + "/election";
        int n = Math.max(2, Integer.parseInt(args.getOrDefault("participants", "2")));
        int h = Math.max(1, Integer.parseInt(args.getOrDefault("handoffs", "100")));

        CuratorFramework[] clients = new CuratorFramework[n];
        LeaderLatch[] latches = new LeaderLatch[n];
        for (int i = 0; i < n; i++) {
            clients[i] = client(connect);
            if (i == 0) clients[0].create().orSetData().creatingParentsIfNeeded().withMode(CreateMode.PERSISTENT).forPath(dir);
            latches[i] = join(clients[i], dir, i);
        }
        if (awaitElected(-1)[0] != 0) throw new IllegalStateException("p-000 should lead first");
        int leader = 0;

        long[] samples = new long[h], closes = new long[h], requests = new long[h], cycles = new long[h];
        for (int k = 0; k < h; k++) {
            long p0 = BenchStats.quietPackets(connect);
            long t0 = System.nanoTime();
            latches[leader].close();
            closes[k] = System.nanoTime() - t0;
            long[] next = awaitElected(leader);
            samples[k] = next[1] - t0;
            requests[k] = BenchStats.quietPackets(connect) - p0;
            latches[leader] = join(clients[leader], dir, leader); // rejoins at the end of the line
            cycles[k] = BenchStats.quietPackets(connect) - p0;
            leader = (int) next[0];
        }

        double seconds = Arrays.stream(samples).sum() / 1e9;
        double meanRequests = Arrays.stream(requests).sum() / (double) h;
        double meanCycle = Arrays.stream(cycles).sum() / (double) h;
        Arrays.sort(samples);
        Arrays.sort(closes);
        Arrays.sort(requests);
        Arrays.sort(cycles);
        System.out.println(String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"leader_failover\",\"clients\":%d,\"ops\":%d,\"ops_per_s\":%.1f,"
                        + "\"p50_us\":%s,\"p99_us\":%s,\"participants\":%d,\"handoffs\":%d,"
                        + "\"requests_per_handoff_p50\":%d,\"requests_per_handoff_mean\":%.2f,"
                        + "\"requests_per_cycle_p50\":%d,\"requests_per_cycle_mean\":%.2f,"
                        + "\"close_p50_us\":%s,\"close_p99_us\":%s}",
                IMPL, n, h, h / seconds, BenchStats.us(BenchStats.pct(samples, 50)), BenchStats.us(BenchStats.pct(samples, 99)),
                n, h, BenchStats.pct(requests, 50), meanRequests, BenchStats.pct(cycles, 50), meanCycle,
                BenchStats.us(BenchStats.pct(closes, 50)), BenchStats.us(BenchStats.pct(closes, 99))));
        System.out.flush();

        for (LeaderLatch latch : latches) latch.close();
        for (CuratorFramework client : clients) client.close();
    }

    static CuratorFramework client(String connect) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 30000, 15000, new ExponentialBackoffRetry(100, 5));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
        return client;
    }

    /** Starts participant i's latch and returns once its node exists. */
    static LeaderLatch join(CuratorFramework client, String dir, int i) throws Exception {
        LeaderLatch latch = new LeaderLatch(client, dir, String.format(Locale.ROOT, "p-%03d", i));
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                ELECTED.add(new long[] {i, System.nanoTime()});
            }

            @Override
            public void notLeader() {}
        });
        latch.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (latch.getOurPath() == null) {
            if (System.nanoTime() > deadline) throw new IllegalStateException("p-" + i + "'s node never appeared");
            Thread.sleep(1); // poll interval: LeaderLatch.start() creates the node in the background
        }
        return latch;
    }

    /** The next election of a participant other than `previous`. */
    static long[] awaitElected(int previous) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            long[] e = ELECTED.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            if (e == null) throw new IllegalStateException("no new leader within 30 s");
            if (e[0] != previous) return e;
        }
    }
}
