// Apache Curator 5.4's side of curator-bench's `discovery_cache` scenario (issue 14): the same
// service, the same timing, the same JSON lines, so scripts/bench-discovery can run both against
// one server.
//
// Usage: java DiscoveryBench --connect HOST:PORT --path /bench/x [--instances 1000] [--caches 5]
//                            [--adds 200]
//        java DiscoveryBench --scenario discovery_scale --connect HOST:PORT --path /bench/x [--instances 1000]
//
// A registrar client registers N instances of the service "bench" under <path>/services with
// Curator's ServiceDiscovery (JsonInstanceSerializer, a HashMap payload, DYNAMIC, ids i-<n>),
// from a few threads (not timed). Then C clients, each its own session with a ServiceDiscovery
// of its own, start a ServiceCache of "bench" one after the other; an init sample runs from just
// before ServiceCache.start() to its return (the instances present are loaded then). Then the
// registrar registers A more instances one at a time. Curator's ServiceCacheListener says only
// cacheChanged(), so each cache's listener looks for the new id in getInstances(), as a user
// must; the moment is taken when cacheChanged() is called (before the lookup, in Curator's
// favour). An event sample runs from just before registerService() to the last cache's moment;
// the next registration starts only then. Prints two JSON lines.
//
// discovery_scale (issue 30): the registrar registers N instances the same way (not timed); then,
// after System.gc(), the process reads its resident memory (VmRSS) and used heap, one more client
// starts a ServiceCache of "bench" (the sample runs from just before start() to its return, the
// instances loaded), and after another System.gc() reads them again. Prints one JSON line: the
// load time and the growth of resident memory and of used heap over N.

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.apache.curator.x.discovery.details.ServiceCacheListener;

@SuppressWarnings({"rawtypes", "unchecked"})
public class DiscoveryBench {
    static final String IMPL = "curator 5.4";
    static final String SERVICE = "bench";

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String scenario = args.getOrDefault("scenario", "discovery_cache");
        if (scenario.equals("discovery_scale")) {
            discoveryScale(args);
            return;
        }
        if (!scenario.equals("discovery_cache")) {
            System.err.println("DiscoveryBench: unsupported scenario " + scenario);
            System.exit(3);
        }
        String connect = args.getOrDefault("connect", "127.0.0.1:2181");
        String base = args.getOrDefault("path", "/bench/java-" + Long.toString(System.nanoTime(), 36)) + "/services";
        int n = Math.max(1, Integer.parseInt(args.getOrDefault("instances", "1000")));
        int c = Math.max(1, Integer.parseInt(args.getOrDefault("caches", "5")));
        int adds = Math.max(1, Integer.parseInt(args.getOrDefault("adds", "200")));

        // The registrar and its N instances, registered up front (not timed).
        CuratorFramework registrarClient = client(connect);
        ServiceDiscovery<Map> registrar = discovery(registrarClient, base);
        registerAll(registrar, n);

        // The caches: each on its own client, started one after the other.
        final long[][] addedAt = new long[c][adds];
        final CountDownLatch[] seen = new CountDownLatch[adds];
        for (int k = 0; k < adds; k++) seen[k] = new CountDownLatch(c);
        final int[] current = {-1};
        final String[] currentId = {null};
        final Object lock = new Object();
        List<CuratorFramework> cacheClients = new ArrayList<>();
        List<ServiceDiscovery<Map>> discoveries = new ArrayList<>();
        List<ServiceCache<Map>> caches = new ArrayList<>();
        long[] inits = new long[c];
        for (int j = 0; j < c; j++) {
            CuratorFramework client = client(connect);
            ServiceDiscovery<Map> d = discovery(client, base);
            ServiceCache<Map> cache = d.serviceCacheBuilder().name(SERVICE).build();
            final int which = j;
            cache.addListener(new ServiceCacheListener() {
                @Override
                public void cacheChanged() {
                    long now = System.nanoTime();
                    int k;
                    String id;
                    synchronized (lock) {
                        k = current[0];
                        id = currentId[0];
                    }
                    if (k < 0 || addedAt[which][k] != 0) return;
                    for (ServiceInstance<Map> inst : cache.getInstances()) {
                        if (id.equals(inst.getId())) {
                            addedAt[which][k] = now;
                            seen[k].countDown();
                            return;
                        }
                    }
                }

                @Override
                public void stateChanged(CuratorFramework client, ConnectionState newState) {
                }
            });
            long t0 = System.nanoTime();
            cache.start();
            inits[j] = System.nanoTime() - t0;
            int loaded = cache.getInstances().size();
            if (loaded != n) throw new IllegalStateException("cache " + j + " loaded " + loaded + " instances, not " + n);
            cacheClients.add(client);
            discoveries.add(d);
            caches.add(cache);
        }
        StringBuilder perInit = new StringBuilder("[");
        long initSum = 0, initMax = 0;
        for (int j = 0; j < c; j++) {
            perInit.append(j > 0 ? "," : "").append(BenchStats.us(inits[j]));
            initSum += inits[j];
            initMax = Math.max(initMax, inits[j]);
        }
        long[] initSorted = inits.clone();
        Arrays.sort(initSorted);
        // ops_per_s: instances loaded per second by a cache, on the mean load time.
        double initMean = initSum / (double) c / 1e9;
        String initLine = String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"discovery_cache_init\",\"clients\":%d,\"ops\":%d,\"ops_per_s\":%.1f,"
                        + "\"p50_us\":%s,\"p99_us\":%s,\"instances\":%d,\"caches\":%d,\"per_cache_init_us\":%s],"
                        + "\"init_max_us\":%s}",
                IMPL, c + 1, n, n / initMean, BenchStats.us(BenchStats.pct(initSorted, 50)), BenchStats.us(BenchStats.pct(initSorted, 99)), n, c, perInit,
                BenchStats.us(initMax));

        // The additions, one at a time.
        long[] all = new long[adds], first = new long[adds], registers = new long[adds];
        long[][] perCache = new long[c][adds];
        long started = System.nanoTime(), last = started;
        for (int k = 0; k < adds; k++) {
            ServiceInstance<Map> inst = instance(n + k);
            synchronized (lock) {
                current[0] = k;
                currentId[0] = inst.getId();
            }
            long t0 = System.nanoTime();
            registrar.registerService(inst);
            registers[k] = System.nanoTime() - t0;
            if (!seen[k].await(30, TimeUnit.SECONDS)) throw new IllegalStateException("not every cache saw " + inst.getId() + " added");
            long min = Long.MAX_VALUE, max = Long.MIN_VALUE;
            for (int j = 0; j < c; j++) {
                long at = addedAt[j][k];
                perCache[j][k] = at - t0;
                min = Math.min(min, at);
                max = Math.max(max, at);
            }
            first[k] = min - t0;
            all[k] = max - t0;
            last = max;
        }
        double seconds = (last - started) / 1e9;
        String[] per = BenchStats.perClient(perCache);
        String per50 = per[0], per99 = per[1];
        Arrays.sort(all);
        Arrays.sort(first);
        Arrays.sort(registers);
        String eventLine = String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"discovery_cache_event\",\"clients\":%d,\"ops\":%d,\"ops_per_s\":%.1f,"
                        + "\"p50_us\":%s,\"p99_us\":%s,\"instances\":%d,\"caches\":%d,"
                        + "\"first_cache_p50_us\":%s,\"first_cache_p99_us\":%s,"
                        + "\"per_cache_p50_us\":%s,\"per_cache_p99_us\":%s,"
                        + "\"register_p50_us\":%s,\"register_p99_us\":%s}",
                IMPL, c + 1, adds, adds / seconds, BenchStats.us(BenchStats.pct(all, 50)), BenchStats.us(BenchStats.pct(all, 99)), n, c,
                BenchStats.us(BenchStats.pct(first, 50)), BenchStats.us(BenchStats.pct(first, 99)), per50, per99, BenchStats.us(BenchStats.pct(registers, 50)), BenchStats.us(BenchStats.pct(registers, 99)));
        System.out.println(initLine);
        System.out.println(eventLine);
        System.out.flush();

        for (ServiceCache<Map> cache : caches) cache.close();
        for (ServiceDiscovery<Map> d : discoveries) d.close();
        for (CuratorFramework client : cacheClients) client.close();
        registrarClient.close(); // the session ends; the server deletes the instances
    }

    /** Registers instances 0..n-1 from a few threads. */
    static void registerAll(ServiceDiscovery<Map> registrar, int n) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(16);
        List<Future<?>> pending = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ServiceInstance<Map> inst = instance(i);
            pending.add(pool.submit(() -> { registrar.registerService(inst); return null; }));
        }
        for (Future<?> f : pending) f.get();
        pool.shutdown();
        if (!pool.awaitTermination(30, TimeUnit.SECONDS)) throw new IllegalStateException("the registering pool did not end");
    }

    /** discovery_scale: one ServiceCache's load of N instances, its time and memory. */
    static void discoveryScale(Map<String, String> args) throws Exception {
        String connect = args.getOrDefault("connect", "127.0.0.1:2181");
        String base = args.getOrDefault("path", "/bench/java-" + Long.toString(System.nanoTime(), 36)) + "/services";
        int n = Math.max(1, Integer.parseInt(args.getOrDefault("instances", "1000")));
        CuratorFramework registrarClient = client(connect);
        ServiceDiscovery<Map> registrar = discovery(registrarClient, base);
        registerAll(registrar, n);

        long[] before = memory();
        CuratorFramework client = client(connect);
        ServiceDiscovery<Map> d = discovery(client, base);
        ServiceCache<Map> cache = d.serviceCacheBuilder().name(SERVICE).build();
        long t0 = System.nanoTime();
        cache.start();
        long load = System.nanoTime() - t0;
        long[] after = memory();
        int loaded = cache.getInstances().size();
        if (loaded != n) throw new IllegalStateException("the cache loaded " + loaded + " instances, not " + n);
        String us = BenchStats.us(load);
        System.out.println(String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"discovery_scale\",\"clients\":1,\"ops\":%d,\"ops_per_s\":%.1f,"
                        + "\"p50_us\":%s,\"p99_us\":%s,\"instances\":%d,\"init_us\":%s,\"rss_bytes_per_instance\":%.0f,"
                        + "\"rss_before_bytes\":%d,\"rss_after_bytes\":%d,\"heap_bytes_per_instance\":%.0f}",
                IMPL, n, n / (load / 1e9), us, us, n, us, (after[0] - before[0]) / (double) n, before[0], after[0],
                (after[1] - before[1]) / (double) n));
        System.out.flush();

        cache.close();
        d.close();
        registrar.close();
        client.close();
        registrarClient.close();
    }

    /** {VmRSS bytes, used heap bytes} after a System.gc(). */
    static long[] memory() throws Exception {
        System.gc();
        Runtime rt = Runtime.getRuntime();
        long heap = rt.totalMemory() - rt.freeMemory();
        long rss = 0;
        for (String line : java.nio.file.Files.readAllLines(java.nio.file.Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) rss = Long.parseLong(line.split("\\s+")[1]) * 1024;
        }
        return new long[] {rss, heap};
    }

    static ServiceInstance<Map> instance(int n) throws Exception {
        Map<String, Object> payload = new HashMap<>();
        payload.put("zone", "z-" + (n % 4));
        payload.put("weight", n % 10);
        return ServiceInstance.<Map>builder()
                .name(SERVICE)
                .id(String.format(Locale.ROOT, "i-%05d", n))
                .address("10.0.0.1")
                .port(8000 + (n % 1000))
                .payload(payload)
                .serviceType(ServiceType.DYNAMIC)
                .build();
    }

    static ServiceDiscovery<Map> discovery(CuratorFramework client, String base) throws Exception {
        ServiceDiscovery<Map> d = ServiceDiscoveryBuilder.builder(Map.class)
                .client(client)
                .basePath(base)
                .serializer(new JsonInstanceSerializer<>(Map.class))
                .build();
        d.start();
        return d;
    }

    static CuratorFramework client(String connect) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 30000, 15000, new ExponentialBackoffRetry(100, 5));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
        return client;
    }

}
