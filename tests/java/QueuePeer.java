// Interop peer for the Rust queue tests: Apache Curator 5.x's own DistributedQueue,
// DistributedPriorityQueue, DistributedDelayQueue, DistributedIdQueue and QueueSharder on the same paths as the Rust queues, with
// items as UTF-8 text (the serializer below, which refuses bytes that are not UTF-8 as the Rust
// StringSerializer does).
//
// Usage: java QueuePeer <connect>
// Connects one client (for RAW), prints READY, then answers each line of stdin:
//   CONSUME <id> <kind> <path> <lockPath|->
//       a queue of kind <kind> (queue, priority, delay or id) with a consumer, on a client
//       (session) of its own, lock-safe with <lockPath> unless "-"; answers "STARTED <id>". From
//       then on the consumer prints "ITEM <id> <item> <epoch ms>" for each item it is handed,
//       when it is handed it (the time is System.currentTimeMillis() then).
//       (Curator's QueueConsumer is not told the item's node name, so none is printed.)
//   PRODUCE <id> <kind> <path>
//       a producer-only queue (no consumer) on a client of its own; answers "STARTED <id>".
//   PUT <id> <arg|-> <item>
//       put(item) on queue <id>: for a priority queue <arg> is the priority (an int), for a delay
//       queue the epoch time in ms before which the item is not consumed, for an id queue the
//       item's id; "-" for a plain queue.
//       Puts are made in the foreground (putInBackground(false)), so "PUT" answers once the
//       node is there.
//   PUTN <id> <arg|-> <prefix> <n>
//       puts <prefix>-0 ... <prefix>-<n-1>, one node each, in order; answers "PUT <n>".
//   PUTMULTI <id> <arg|-> <item> <item> ...
//       putMulti: all the items in one node; answers "PUT <count>".
//   REMOVE <id> <itemId>
//       DistributedIdQueue.remove(itemId) on id queue <id>; answers "REMOVED <count>".
//   RAW <path> <hex>
//       creates the persistent sequential node <path>/queue- holding the bytes <hex> ("-" for
//       none), as a producer with broken framing would; answers "RAW <node name>".
//   SHARDER <id> <path> <leaderPath> <threshold>
//       Curator's QueueSharder on <path>, led on <leaderPath>, a threshold of <threshold> nodes
//       checked every 5 ms, on a client of its own; its allocator makes DistributedQueues whose
//       consumer prints "ITEM <id> ..." as CONSUME's does. Answers "STARTED <id>". PUT <id> -
//       <item> then puts through getQueue().
//   SHARDS <id>
//       the sharder's getQueuePaths(), sorted: answers "SHARDS <n> <path> <path> ...".
//   STOP <id>
//       closes queue (or sharder) <id> and its client; answers "STOPPED <id>".
//   QUIT
//       closes everything, answers BYE and exits.
// A command that fails answers "ERROR <exception>". Items are words (no spaces).

import java.io.BufferedReader;
import java.io.Closeable;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.DistributedDelayQueue;
import org.apache.curator.framework.recipes.queue.DistributedIdQueue;
import org.apache.curator.framework.recipes.queue.DistributedPriorityQueue;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.MultiItem;
import org.apache.curator.framework.recipes.queue.QueueAllocator;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.recipes.queue.QueueSharder;
import org.apache.curator.framework.recipes.queue.QueueSharderPolicies;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;

public class QueuePeer {
    static String connect;

    /** UTF-8 text; bytes that are not UTF-8 are refused (Curator then drops the node). */
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

    /** One queue of the peer, with the client it runs on. */
    static final class Peer {
        final String kind;
        final CuratorFramework client;
        final Closeable queue;

        Peer(String kind, CuratorFramework client, Closeable queue) {
            this.kind = kind;
            this.client = client;
            this.queue = queue;
        }

        @SuppressWarnings("unchecked")
        void put(String arg, String item) throws Exception {
            switch (kind) {
                case "queue": ((DistributedQueue<String>) queue).put(item); break;
                case "priority": ((DistributedPriorityQueue<String>) queue).put(item, Integer.parseInt(arg)); break;
                case "delay": ((DistributedDelayQueue<String>) queue).put(item, Long.parseLong(arg)); break;
                case "id": ((DistributedIdQueue<String>) queue).put(item, arg); break;
                case "sharder": ((QueueSharder<String, DistributedQueue<String>>) queue).getQueue().put(item); break;
                default: throw new IllegalStateException(kind);
            }
        }

        @SuppressWarnings("unchecked")
        int remove(String itemId) throws Exception {
            if (!kind.equals("id")) throw new IllegalStateException("REMOVE on a " + kind + " queue");
            return ((DistributedIdQueue<String>) queue).remove(itemId);
        }

        @SuppressWarnings("unchecked")
        void putMulti(String arg, String[] items) throws Exception {
            MultiItem<String> multi = new MultiItem<String>() {
                int next = 0;

                @Override
                public String nextItem() {
                    return next < items.length ? items[next++] : null;
                }
            };
            switch (kind) {
                case "queue": ((DistributedQueue<String>) queue).putMulti(multi); break;
                case "priority": ((DistributedPriorityQueue<String>) queue).putMulti(multi, Integer.parseInt(arg)); break;
                case "delay": ((DistributedDelayQueue<String>) queue).putMulti(multi, Long.parseLong(arg)); break;
                default: throw new IllegalStateException(kind);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        connect = args[0];
        CuratorFramework client = newClient();
        Map<String, Peer> peers = new HashMap<>();
        say("READY");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("QUIT")) break;
            try {
                switch (w[0]) {
                    case "CONSUME": {
                        peers.put(w[1], start(w[2], w[3], w[4].equals("-") ? null : w[4], printing(w[1])));
                        say("STARTED " + w[1]);
                        break;
                    }
                    case "SHARDER": {
                        CuratorFramework c = newClient();
                        QueueConsumer<String> consumer = printing(w[1]);
                        QueueAllocator<String, DistributedQueue<String>> allocator = (cl, p) ->
                                QueueBuilder.builder(cl, consumer, TEXT, p).putInBackground(false).buildQueue();
                        QueueSharderPolicies policies = QueueSharderPolicies.builder()
                                .newQueueThreshold(Integer.parseInt(w[4])).thresholdCheckMs(5).build();
                        QueueSharder<String, DistributedQueue<String>> sharder =
                                new QueueSharder<>(c, allocator, w[2], w[3], policies);
                        sharder.start();
                        peers.put(w[1], new Peer("sharder", c, sharder));
                        say("STARTED " + w[1]);
                        break;
                    }
                    case "SHARDS": {
                        @SuppressWarnings("unchecked")
                        QueueSharder<String, DistributedQueue<String>> sharder =
                                (QueueSharder<String, DistributedQueue<String>>) peer(peers, w[1]).queue;
                        java.util.List<String> paths = new java.util.ArrayList<>(sharder.getQueuePaths());
                        java.util.Collections.sort(paths);
                        say(("SHARDS " + paths.size() + " " + String.join(" ", paths)).trim());
                        break;
                    }
                    case "PRODUCE":
                        peers.put(w[1], start(w[2], w[3], null, null));
                        say("STARTED " + w[1]);
                        break;
                    case "PUT": peer(peers, w[1]).put(w[2], w[3]); say("PUT"); break;
                    case "PUTN": {
                        int n = Integer.parseInt(w[4]);
                        Peer p = peer(peers, w[1]);
                        for (int i = 0; i < n; i++) p.put(w[2], w[3] + "-" + i);
                        say("PUT " + n);
                        break;
                    }
                    case "PUTMULTI": {
                        String[] items = java.util.Arrays.copyOfRange(w, 3, w.length);
                        peer(peers, w[1]).putMulti(w[2], items);
                        say("PUT " + items.length);
                        break;
                    }
                    case "REMOVE": say("REMOVED " + peer(peers, w[1]).remove(w[2])); break;
                    case "RAW": {
                        byte[] data = w[2].equals("-") ? new byte[0] : hex(w[2]);
                        String created = client.create()
                                .withMode(CreateMode.PERSISTENT_SEQUENTIAL)
                                .forPath(w[1] + "/queue-", data);
                        say("RAW " + created.substring(created.lastIndexOf('/') + 1));
                        break;
                    }
                    case "STOP": {
                        Peer p = peers.remove(w[1]);
                        if (p == null) throw new IllegalArgumentException("no queue " + w[1]);
                        p.queue.close();
                        p.client.close();
                        say("STOPPED " + w[1]);
                        break;
                    }
                    default: throw new IllegalArgumentException("unknown command: " + line);
                }
            } catch (Exception e) {
                say("ERROR " + e);
            }
        }
        for (Peer p : peers.values()) {
            p.queue.close();
            p.client.close();
        }
        client.close();
        say("BYE");
    }

    /** A consumer that prints "ITEM <id> <item> <epoch ms>" for each item it is handed. */
    static QueueConsumer<String> printing(String id) {
        return new QueueConsumer<String>() {
            @Override
            public void consumeMessage(String item) {
                say("ITEM " + id + " " + item + " " + System.currentTimeMillis());
            }

            @Override
            public void stateChanged(CuratorFramework c, ConnectionState state) {}
        };
    }

    /** A started queue of `kind` on a client of its own. */
    static Peer start(String kind, String path, String lockPath, QueueConsumer<String> consumer) throws Exception {
        CuratorFramework c = newClient();
        QueueBuilder<String> b = QueueBuilder.builder(c, consumer, TEXT, path).putInBackground(false);
        if (lockPath != null) b = b.lockPath(lockPath);
        Closeable queue;
        switch (kind) {
            case "queue": {
                DistributedQueue<String> q = b.buildQueue();
                q.start();
                queue = q;
                break;
            }
            case "priority": {
                DistributedPriorityQueue<String> q = b.buildPriorityQueue(0);
                q.start();
                queue = q;
                break;
            }
            case "delay": {
                DistributedDelayQueue<String> q = b.buildDelayQueue();
                q.start();
                queue = q;
                break;
            }
            case "id": {
                DistributedIdQueue<String> q = b.buildIdQueue();
                q.start();
                queue = q;
                break;
            }
            default:
                c.close();
                throw new IllegalArgumentException("want queue, priority, delay or id, not " + kind);
        }
        return new Peer(kind, c, queue);
    }

    static Peer peer(Map<String, Peer> peers, String id) {
        Peer p = peers.get(id);
        if (p == null) throw new IllegalArgumentException("no queue " + id);
        return p;
    }

    static byte[] hex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static CuratorFramework newClient() throws InterruptedException {
        CuratorFramework client =
                CuratorFrameworkFactory.newClient(connect, 10000, 5000, new ExponentialBackoffRetry(100, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection");
        return client;
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
