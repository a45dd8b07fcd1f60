// Apache Curator 5.4's side of curator-bench's `queue` scenario (issue 17): one producer and C
// consumers on one DistributedQueue, the same items, the same timing, the same JSON line, so
// scripts/bench-queue can run both against one server.
//
// Usage: java QueueBench --connect HOST:PORT --path /bench/x [--mode plain|lock-safe]
//                        [--consumers 4] [--items 2000] [--item-size 64] [--warmup-items 20]
//
// C consumer sessions, each a CuratorFramework of its own with its own started DistributedQueue
// on <path>/queue with a consumer (lockPath <path>/locks in lock-safe mode), and one producer
// session with a producer-only queue on the same path; every queue puts in the foreground
// (putInBackground(false): put returns once the node is created, as ours does) and runs its
// consumer on Curator's default executor (the queue's own thread, one item at a time, as ours).
// Items are UTF-8 text (the serializer of tests/java/QueuePeer.java) of S bytes:
// "<sequence number>:<put time in ns>:" padded with '.', the put time read just before put() on
// a clock shared by producer and consumers. The producer first puts W untimed items and waits
// for them to be consumed; then, once the server is quiet, it puts N items one after the other.
//
// Printed: put_items_per_s (N over the first timed put's start to the last put's return, with
// put_p50_us / put_p99_us per put call), taken_items_per_s and ops_per_s (N over the first timed
// put's start to the last timed item's consumption), p50_us / p99_us end to end (an item's put
// time to its consumer being called with it), requests_per_item (zk_packets_received through
// mntr, read once the server is quiet before the first timed put and after the last item is
// consumed, per timed item), and over all items: missing (never consumed; the wait ends when no
// item came for 30 s), delivered_twice (extra deliveries, counted again after the queues are
// closed), left_in_queue (item nodes still there at the end) and queue_events (items the consumer
// could not read; Curator reports its other errors only to its log). Plain mode promises at most
// once (a second delivery fails the run), lock-safe mode exactly once (a missing item or a node
// left behind fails it too); a failed check exits 1. Prints one JSON line.

import java.nio.ByteBuffer;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class QueueBench {
    static final String IMPL = "curator 5.4";
    /** The wait for items ends once none came for this long. */
    static final long STALL_NS = TimeUnit.SECONDS.toNanos(30);

    /** UTF-8 text; bytes that are not UTF-8 are refused (as QueuePeer's serializer). */
    static final QueueSerializer<String> TEXT = new QueueSerializer<String>() {
        @Override
        public byte[] serialize(String item) {
            return item.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public String deserialize(byte[] bytes) {
            try {
                return StandardCharsets.UTF_8.newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(ByteBuffer.wrap(bytes))
                        .toString();
            } catch (Exception e) {
                throw new IllegalArgumentException("not UTF-8", e);
            }
        }
    };

    /** Every delivery so far, per item. */
    static final class Deliveries {
        final long[] putNs, takenNs;
        final int[] count;
        long lastProgress = System.nanoTime();

        Deliveries(int total) {
            putNs = new long[total];
            takenNs = new long[total];
            count = new int[total];
        }

        synchronized void add(int seq, long put, long taken) {
            if (seq < 0 || seq >= count.length) return;
            if (count[seq]++ == 0) {
                putNs[seq] = put;
                takenNs[seq] = taken;
            }
            lastProgress = System.nanoTime();
            notifyAll();
        }

        /** Waits until the items [from, to) were all delivered, or none came for STALL_NS. */
        synchronized void waitFor(int from, int to) throws InterruptedException {
            int next = from;
            while (true) {
                while (next < to && count[next] > 0) next++;
                if (next == to) return;
                long left = lastProgress + STALL_NS - System.nanoTime();
                if (left <= 0) return;
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
        }
    }

    static String item(int seq, long putNs, int size) {
        StringBuilder text = new StringBuilder().append(seq).append(':').append(putNs).append(':');
        while (text.length() < size) text.append('.');
        return text.toString();
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String scenario = args.getOrDefault("scenario", "queue");
        if (!scenario.equals("queue")) {
            System.err.println("QueueBench: unsupported scenario " + scenario);
            System.exit(3);
        }
        String mode = args.getOrDefault("mode", "plain");
        if (!mode.equals("plain") && !mode.equals("lock-safe")) {
            System.err.println("QueueBench: --mode " + mode + ": want plain or lock-safe");
            System.exit(2);
        }
        boolean lockSafe = mode.equals("lock-safe");
        String connect = args.getOrDefault("connect", "127.0.0.1:2181");
        String base = args.getOrDefault("path", "/bench/java-" + Long.toString(System.nanoTime(), 36));
        String queuePath = base + "/queue", lockPath = base + "/locks";
        int consumers = Math.max(1, Integer.parseInt(args.getOrDefault("consumers", "4")));
        int timed = Math.max(1, Integer.parseInt(args.getOrDefault("items", "2000")));
        int size = Math.max(0, Integer.parseInt(args.getOrDefault("item-size", "64")));
        int warm = Math.max(0, Integer.parseInt(args.getOrDefault("warmup-items", "20")));
        int total = warm + timed;
        long origin = System.nanoTime();

        CuratorFramework[] clients = new CuratorFramework[consumers + 1];
        for (int i = 0; i <= consumers; i++) clients[i] = client(connect);
        DistributedQueue<String> producer = QueueBuilder.builder(clients[0], null, TEXT, queuePath)
                .putInBackground(false).buildQueue();
        producer.start();
        Deliveries seen = new Deliveries(total);
        AtomicLong events = new AtomicLong();
        QueueConsumer<String> consumer = new QueueConsumer<String>() {
            @Override
            public void consumeMessage(String item) {
                long taken = System.nanoTime() - origin;
                String[] fields = item.split(":", 3);
                try {
                    seen.add(Integer.parseInt(fields[0]), Long.parseLong(fields[1]), taken);
                } catch (RuntimeException e) {
                    events.incrementAndGet();
                    throw new IllegalArgumentException("not a benchmark item: " + item, e);
                }
            }

            @Override
            public void stateChanged(CuratorFramework client, ConnectionState state) {}
        };
        @SuppressWarnings("unchecked")
        DistributedQueue<String>[] queues = new DistributedQueue[consumers];
        for (int i = 0; i < consumers; i++) {
            QueueBuilder<String> b = QueueBuilder.builder(clients[i + 1], consumer, TEXT, queuePath).putInBackground(false);
            if (lockSafe) b = b.lockPath(lockPath);
            queues[i] = b.buildQueue();
            queues[i].start();
        }

        // Warm-up: untimed items, all consumed before the timed phase.
        for (int seq = 0; seq < warm; seq++) producer.put(item(seq, System.nanoTime() - origin, size));
        seen.waitFor(0, warm);

        long p0 = BenchStats.quietPackets(connect);
        long[] putLatencies = new long[timed];
        long firstPut = System.nanoTime() - origin;
        for (int seq = warm; seq < total; seq++) {
            long t0 = System.nanoTime();
            producer.put(item(seq, t0 - origin, size));
            putLatencies[seq - warm] = System.nanoTime() - t0;
        }
        long lastPut = System.nanoTime() - origin;
        seen.waitFor(warm, total);
        long p1 = BenchStats.quietPackets(connect);

        // Late deliveries (a second one of an item) would come before the queues are closed.
        for (DistributedQueue<String> q : queues) q.close();
        producer.close();
        int left;
        try {
            left = clients[0].getChildren().forPath(queuePath).size();
        } catch (org.apache.zookeeper.KeeperException.NoNodeException e) {
            left = 0;
        }
        for (CuratorFramework c : clients) c.close();

        int missing = 0, delivered = 0;
        long twice = 0, lastTaken = firstPut;
        long[] latencies;
        synchronized (seen) {
            for (int seq = 0; seq < total; seq++) {
                if (seen.count[seq] == 0) missing++;
                else twice += seen.count[seq] - 1;
            }
            latencies = new long[timed];
            for (int seq = warm; seq < total; seq++) {
                if (seen.count[seq] == 0) continue;
                latencies[delivered++] = seen.takenNs[seq] - seen.putNs[seq];
                lastTaken = Math.max(lastTaken, seen.takenNs[seq]);
            }
        }
        latencies = Arrays.copyOf(latencies, delivered);
        Arrays.sort(latencies);
        Arrays.sort(putLatencies);
        // At most once (plain) or exactly once, each item removed (lock-safe).
        boolean correct = twice == 0 && (!lockSafe || (missing == 0 && left == 0));

        double putWall = (lastPut - firstPut) / 1e9, takeWall = (lastTaken - firstPut) / 1e9;
        double takenPerS = takeWall > 0 ? delivered / takeWall : 0.0;
        String line = String.format(Locale.ROOT,
                "{\"impl\":\"%s\",\"scenario\":\"queue\",\"clients\":%d,\"ops\":%d,\"ops_per_s\":%.1f,"
                        + "\"p50_us\":%s,\"p99_us\":%s,\"mode\":\"%s\",\"consumers\":%d,\"items\":%d,\"warmup_items\":%d,"
                        + "\"item_size\":%d,\"put_items_per_s\":%.1f,\"taken_items_per_s\":%.1f,\"put_p50_us\":%s,"
                        + "\"put_p99_us\":%s,\"requests_per_item\":%.2f,\"missing\":%d,\"delivered_twice\":%d,"
                        + "\"left_in_queue\":%d,\"queue_events\":%d,\"correct\":%b,\"put_wall_s\":%.3f,\"wall_s\":%.3f}",
                IMPL, consumers, delivered, takenPerS,
                delivered > 0 ? BenchStats.us(BenchStats.pct(latencies, 50)) : "0.0",
                delivered > 0 ? BenchStats.us(BenchStats.pct(latencies, 99)) : "0.0",
                mode, consumers, timed, warm, size, putWall > 0 ? timed / putWall : 0.0, takenPerS,
                BenchStats.us(BenchStats.pct(putLatencies, 50)), BenchStats.us(BenchStats.pct(putLatencies, 99)),
                (p1 - p0) / (double) timed, missing, twice, left, events.get(), correct, putWall, takeWall);
        if (!correct) {
            System.err.println("QueueBench: the queue is wrong in " + mode + " mode: " + line);
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
