// Apache Curator 5.4's side of curator-bench's `children_cache` and `tree_cache` scenarios (the
// harness's contract, ../shared/bench/README.md), plus the memory a cache holds per node, so
// scripts/bench-scale can run both against one server.
//
// Usage: java CacheBench --scenario children_cache|tree_cache --connect HOST:PORT --path /bench/x
//            [--children 1000] [--parents 1] [--adds 1000]
//
// A writer session creates C nodes of 100 bytes under <path>/cache, pipelined, before the cache
// starts: children of it for children_cache (a PathChildrenCache with data); for tree_cache (a
// CuratorCache of <path>/cache) spread evenly over P parents p-000, p-001, ... when P > 1. A second
// session runs the cache. The `<scenario>_init` line: start() to the initialized event, and the
// memory the cache grew by over C (rss_bytes_per_node: VmRSS from /proc/self/status;
// heap_bytes_per_node: the runtime's used heap; both after System.gc(), before start() and after
// the initialized event). The `<scenario>_event` line: the writer creates M nodes add-NNNNNN
// under <path>/cache one at a time; a sample runs from just before create() to the cache's
// callback for that node; create_p50_us is the writer's create() alone (the server's share).
// Then everything under <path>/cache is deleted, so a series of runs does not grow the server.

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.cache.PathChildrenCache;
import org.apache.curator.framework.recipes.cache.PathChildrenCacheEvent;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

public class CacheBench {
    static final String IMPL = "curator 5.4";
    /** Creates in flight while filling. */
    static final int WINDOW = 1000;

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        String scenario = args.getOrDefault("scenario", "children_cache");
        if (!scenario.equals("children_cache") && !scenario.equals("tree_cache")) {
            System.err.println("CacheBench: unsupported scenario " + scenario);
            System.exit(3);
        }
        boolean tree = scenario.equals("tree_cache");
        String connect = args.getOrDefault("connect", "127.0.0.1:2181");
        String dir = args.getOrDefault("path", "/bench/java-" + Long.toString(System.nanoTime(), 36)) + "/cache";
        int c = Integer.parseInt(args.getOrDefault("children", "1000"));
        int parents = tree ? Math.max(1, Integer.parseInt(args.getOrDefault("parents", "1"))) : 1;
        int m = Integer.parseInt(args.getOrDefault("adds", "1000"));

        CuratorFramework writer = client(connect), reader = client(connect);
        writer.create().orSetData().creatingParentsIfNeeded().withMode(CreateMode.PERSISTENT).forPath(dir);
        fill(writer.getZookeeperClient().getZooKeeper(), dir, c, parents);

        long[] issued = new long[m], seen = new long[m];
        CountDownLatch initialized = new CountDownLatch(1), all = new CountDownLatch(m);
        Consumer<String> onAdd = path -> {
            String name = ZKPaths.getNodeFromPath(path);
            if (name.startsWith("add-")) {
                int i = Integer.parseInt(name.substring(4));
                if (i < m && seen[i] == 0) {
                    seen[i] = System.nanoTime();
                    all.countDown();
                }
            }
        };

        long[] before = memory();
        AutoCloseable cache;
        long t0;
        if (tree) {
            CuratorCache cc = CuratorCache.build(reader, dir);
            cc.listenable().addListener(CuratorCacheListener.builder()
                    .forCreates(node -> onAdd.accept(node.getPath()))
                    .forInitialized(initialized::countDown)
                    .build());
            t0 = System.nanoTime();
            cc.start();
            cache = cc;
        } else {
            PathChildrenCache pcc = new PathChildrenCache(reader, dir, true);
            pcc.getListenable().addListener((client, e) -> {
                if (e.getType() == PathChildrenCacheEvent.Type.INITIALIZED) initialized.countDown();
                else if (e.getType() == PathChildrenCacheEvent.Type.CHILD_ADDED) onAdd.accept(e.getData().getPath());
            });
            t0 = System.nanoTime();
            pcc.start(PathChildrenCache.StartMode.POST_INITIALIZED_EVENT);
            cache = pcc;
        }
        if (!initialized.await(300, TimeUnit.SECONDS)) throw new IllegalStateException("the cache never initialized");
        long init = System.nanoTime() - t0;
        long[] after = memory();
        double rssPerNode = (after[0] - before[0]) / (double) Math.max(1, c);
        double heapPerNode = (after[1] - before[1]) / (double) Math.max(1, c);
        System.out.println(String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"%s_init\",\"clients\":1,\"ops\":%d,\"ops_per_s\":%.1f,\"p50_us\":%s,\"p99_us\":%s,"
                        + "\"children\":%d,\"parents\":%d,\"rss_bytes_per_node\":%.0f,\"heap_bytes_per_node\":%.0f,"
                        + "\"rss_before_kib\":%d,\"rss_after_kib\":%d}",
                IMPL, scenario, c, c / (init / 1e9), BenchStats.us(init), BenchStats.us(init), c, parents, rssPerNode, heapPerNode,
                before[0] / 1024, after[0] / 1024));
        System.out.flush();

        byte[] data = new byte[100];
        Arrays.fill(data, (byte) 'y');
        long[] creates = new long[Math.max(1, m)];
        for (int i = 0; i < m; i++) {
            issued[i] = System.nanoTime();
            writer.create().forPath(String.format(Locale.ROOT, "%s/add-%06d", dir, i), data);
            creates[i] = System.nanoTime() - issued[i];
        }
        Arrays.sort(creates);
        boolean complete = all.await(120, TimeUnit.SECONDS);
        long[] latency = new long[m];
        long last = 0;
        int got = 0;
        for (int i = 0; i < m; i++) {
            if (seen[i] == 0) continue;
            latency[got++] = seen[i] - issued[i];
            last = Math.max(last, seen[i]);
        }
        latency = Arrays.copyOf(latency, Math.max(1, got));
        Arrays.sort(latency);
        double span = m > 0 ? (last - issued[0]) / 1e9 : 0;
        System.out.println(String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"%s_event\",\"clients\":1,\"ops\":%d,\"ops_per_s\":%.1f,\"p50_us\":%s,\"p99_us\":%s,"
                        + "\"children\":%d,\"complete\":%b,\"create_p50_us\":%s}",
                IMPL, scenario, m, span > 0 ? m / span : 0, BenchStats.us(BenchStats.pct(latency, 50)),
                BenchStats.us(BenchStats.pct(latency, 99)), c, complete, BenchStats.us(BenchStats.pct(creates, 50))));
        System.out.flush();
        cache.close();
        reader.close();
        clear(writer.getZookeeperClient().getZooKeeper(), dir);
        writer.close();
        if (!complete) System.exit(1);
    }

    /** Deletes dir and everything below it (the p- parents' children too, as fill makes them), WINDOW deletes
     *  in flight; only the parents are listed. */
    static void clear(ZooKeeper zk, String dir) throws Exception {
        java.util.List<String> children = new java.util.ArrayList<>(), leaves = new java.util.ArrayList<>();
        for (String name : zk.getChildren(dir, false)) {
            children.add(dir + "/" + name);
            if (name.startsWith("p-")) {
                for (String leaf : zk.getChildren(dir + "/" + name, false)) leaves.add(dir + "/" + name + "/" + leaf);
            }
        }
        for (java.util.List<String> paths : java.util.Arrays.asList(leaves, children, java.util.Collections.singletonList(dir))) {
            Semaphore window = new Semaphore(WINDOW);
            CountDownLatch done = new CountDownLatch(paths.size());
            for (String path : paths) {
                window.acquire();
                zk.delete(path, -1, (rc, p, ctx) -> {
                    window.release();
                    done.countDown();
                }, null);
            }
            done.await();
        }
    }

    /** C nodes of 100 bytes under dir (spread over `parents` children of it when > 1), WINDOW in flight. */
    static void fill(ZooKeeper zk, String dir, int c, int parents) throws Exception {
        String[] dirs = new String[parents];
        for (int p = 0; p < parents; p++) {
            dirs[p] = parents > 1 ? String.format(Locale.ROOT, "%s/p-%03d", dir, p) : dir;
            if (parents > 1) zk.create(dirs[p], new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        }
        byte[] data = new byte[100];
        Arrays.fill(data, (byte) 'x');
        Semaphore window = new Semaphore(WINDOW);
        CountDownLatch made = new CountDownLatch(c);
        int[] failed = new int[1];
        for (int i = 0; i < c; i++) {
            window.acquire();
            zk.create(String.format(Locale.ROOT, "%s/pre-%06d", dirs[i % parents], i), data, ZooDefs.Ids.OPEN_ACL_UNSAFE,
                    CreateMode.PERSISTENT, (rc, path, ctx, name) -> {
                        if (rc != KeeperException.Code.OK.intValue()) {
                            synchronized (failed) {
                                failed[0] = rc;
                            }
                        }
                        window.release();
                        made.countDown();
                    }, null);
        }
        made.await();
        if (failed[0] != 0) throw KeeperException.create(KeeperException.Code.get(failed[0]), dir);
    }

    /** {VmRSS bytes, used heap bytes}, each after a full collection. */
    static long[] memory() throws Exception {
        for (int i = 0; i < 2; i++) System.gc();
        Runtime rt = Runtime.getRuntime();
        long heap = rt.totalMemory() - rt.freeMemory();
        long rss = 0;
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) rss = Long.parseLong(line.split("\\s+")[1]) * 1024;
        }
        return new long[] {rss, heap};
    }

    static CuratorFramework client(String connect) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 30000, 15000, new ExponentialBackoffRetry(100, 5));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
        return client;
    }
}
