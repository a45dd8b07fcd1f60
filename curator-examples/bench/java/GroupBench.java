// Apache Curator 5.4's side of curator-bench's `group_leave` scenario: the same group, the same
// timing, the same JSON line, so scripts/bench-group can run both against one server.
//
// Usage: java GroupBench --connect HOST:PORT --path /bench/x [--members 100] [--observers 5]
//                        [--leave session|member]
//
// Members and observers each have their own CuratorFramework (their own session) and join
// <path>/group with Curator's GroupMember (ids m-<i> and obs-<j>). Curator's GroupMember has no
// listener, so each observer also runs a CuratorCache on the group's path (the cache type its
// GroupMember keeps inside) and notes when each NODE_DELETED arrives. Once every observer sees all
// members, the members leave one at a time by closing their client (its session ends, the
// server deletes the member's ephemeral node). A sample runs from just before close() to the
// last observer's delete event; the next member leaves only then. With --leave member a member
// leaves by GroupMember.close() instead (its node is deleted, the session stays; the clients
// close after the last sample). Prints one JSON line.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.CreateMode;

public class GroupBench {
    static final String IMPL = "curator 5.4";

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String scenario = args.getOrDefault("scenario", "group_leave");
        if (!scenario.equals("group_leave")) {
            System.err.println("GroupBench: unsupported scenario " + scenario);
            System.exit(3);
        }
        String connect = args.getOrDefault("connect", "127.0.0.1:2181");
        String dir = args.getOrDefault("path", "/bench/java-" + Long.toString(System.nanoTime(), 36)) + "/group";
        int m = Math.max(1, Integer.parseInt(args.getOrDefault("members", "100")));
        int o = Math.max(1, Integer.parseInt(args.getOrDefault("observers", "5")));
        String leave = args.getOrDefault("leave", "session");
        if (!leave.equals("session") && !leave.equals("member")) {
            System.err.println("GroupBench: --leave " + leave + ": want session or member");
            System.exit(2);
        }

        // Observers: a GroupMember and a CuratorCache each, on one client each.
        long[][] deletedAt = new long[o][m];
        CountDownLatch[] gone = new CountDownLatch[m];
        for (int i = 0; i < m; i++) gone[i] = new CountDownLatch(o);
        List<CuratorFramework> observerClients = new ArrayList<>();
        List<GroupMember> observers = new ArrayList<>();
        List<CuratorCache> caches = new ArrayList<>();
        for (int j = 0; j < o; j++) {
            CuratorFramework client = client(connect);
            if (j == 0) client.create().orSetData().creatingParentsIfNeeded().withMode(CreateMode.PERSISTENT).forPath(dir);
            final int observer = j;
            CuratorCache cache = CuratorCache.build(client, dir);
            cache.listenable().addListener(CuratorCacheListener.builder().forDeletes(data -> {
                long now = System.nanoTime();
                String name = ZKPaths.getNodeFromPath(data.getPath());
                if (!name.startsWith("m-")) return;
                int i = Integer.parseInt(name.substring(2));
                if (i < m && deletedAt[observer][i] == 0) {
                    deletedAt[observer][i] = now;
                    gone[i].countDown();
                }
            }).build());
            cache.start();
            GroupMember member = new GroupMember(client, dir, "obs-" + j, ("bench obs-" + j).getBytes(StandardCharsets.UTF_8));
            member.start();
            observerClients.add(client);
            observers.add(member);
            caches.add(cache);
        }

        // Members.
        CuratorFramework[] memberClients = new CuratorFramework[m];
        GroupMember[] members = new GroupMember[m];
        String[] ids = new String[m];
        for (int i = 0; i < m; i++) {
            ids[i] = String.format(Locale.ROOT, "m-%03d", i);
            memberClients[i] = client(connect);
            members[i] = new GroupMember(memberClients[i], dir, ids[i], ("bench " + ids[i]).getBytes(StandardCharsets.UTF_8));
            members[i].start();
        }

        // Warm: every observer's GroupMember and cache hold every member.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (!allSeen(observers, caches, dir, ids)) {
            if (System.nanoTime() > deadline) throw new IllegalStateException("the observers did not see all " + m + " members");
            Thread.sleep(10);
        }

        long[] all = new long[m], first = new long[m], closes = new long[m];
        long[][] perObserver = new long[o][m];
        long started = System.nanoTime(), last = started;
        for (int i = 0; i < m; i++) {
            long t0 = System.nanoTime();
            if (leave.equals("session")) memberClients[i].close();
            else members[i].close();
            closes[i] = System.nanoTime() - t0;
            if (!gone[i].await(30, TimeUnit.SECONDS)) throw new IllegalStateException("not every observer saw " + ids[i] + " leave");
            long min = Long.MAX_VALUE, max = Long.MIN_VALUE;
            for (int j = 0; j < o; j++) {
                long at = deletedAt[j][i];
                perObserver[j][i] = at - t0;
                min = Math.min(min, at);
                max = Math.max(max, at);
            }
            first[i] = min - t0;
            all[i] = max - t0;
            last = max;
        }
        double seconds = (last - started) / 1e9;

        String[] per = BenchStats.perClient(perObserver);
        String per50 = per[0], per99 = per[1];
        Arrays.sort(all);
        Arrays.sort(first);
        Arrays.sort(closes);
        System.out.println(String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"group_leave\",\"clients\":%d,\"ops\":%d,\"ops_per_s\":%.1f,"
                        + "\"p50_us\":%s,\"p99_us\":%s,\"members\":%d,\"observers\":%d,\"leave\":\"%s\","
                        + "\"first_observer_p50_us\":%s,\"first_observer_p99_us\":%s,"
                        + "\"per_observer_p50_us\":%s,\"per_observer_p99_us\":%s,"
                        + "\"close_p50_us\":%s,\"close_p99_us\":%s}",
                IMPL, m + o, m, m / seconds, BenchStats.us(BenchStats.pct(all, 50)), BenchStats.us(BenchStats.pct(all, 99)), m, o, leave,
                BenchStats.us(BenchStats.pct(first, 50)), BenchStats.us(BenchStats.pct(first, 99)), per50, per99, BenchStats.us(BenchStats.pct(closes, 50)), BenchStats.us(BenchStats.pct(closes, 99))));
        System.out.flush();

        for (CuratorCache cache : caches) cache.close();
        for (GroupMember member : observers) member.close();
        for (CuratorFramework client : observerClients) client.close();
        if (leave.equals("member")) for (CuratorFramework client : memberClients) client.close();
    }

    static CuratorFramework client(String connect) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 30000, 15000, new ExponentialBackoffRetry(100, 5));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
        return client;
    }

    static boolean allSeen(List<GroupMember> observers, List<CuratorCache> caches, String dir, String[] ids) {
        for (int j = 0; j < observers.size(); j++) {
            Map<String, byte[]> view = observers.get(j).getCurrentMembers();
            for (String id : ids) {
                if (!view.containsKey(id) || caches.get(j).get(dir + "/" + id).isEmpty()) return false;
            }
        }
        return true;
    }

}
