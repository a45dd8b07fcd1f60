// Interop peer for the Rust leader election tests: Apache Curator 5.x's own LeaderLatch or
// LeaderSelector participants on the same path as Rust participants.
//
// Usage: java LeaderPeer <connect> <latch|selector> <path> <id>...
// Makes one client (its own session) and one participant (not started) per id, prints READY,
// then answers each line of stdin with one line:
//   START id         starts the participant; answers "STARTED id" once its node is in the line
//                    (getParticipants() lists it)
//   CLOSE id         closes it (a latch silently); answers "CLOSED id"
//   LEADER id        "LEADER <leader id, or - for none> <isLeader>" from the participant's getLeader()
//   PARTICIPANTS id  "PARTICIPANTS id:isLeader id:isLeader ..." from its getParticipants(), in order
//   TOKEN id         "TOKEN id <czxid of its node, or -1>": the fencing token the Rust side uses
//   QUIT             closes what is still open and the clients, answers BYE and exits
// A command that fails answers "ERROR <message>". Besides the answers, it prints at any time
//   ELECTED id <micros>   when the participant becomes leader (LeaderLatchListener.isLeader,
//                         or LeaderSelectorListener.takeLeadership entered)
//   DEPOSED id <micros>   when its leadership ends (notLeader; takeLeadership returning; for a
//                         latch closed while leading, the moment just before close())
// with times in microseconds since the epoch, the clock the Rust side reads.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

public class LeaderPeer {
    /** One participant: a client, and a latch or a selector on it. */
    static final class Member {
        final String id;
        final CuratorFramework client;
        LeaderLatch latch;
        LeaderSelector selector;
        /** When it became leader (micros), 0 when not leading; set by the latch's listener. */
        final AtomicLong leadingSince = new AtomicLong();
        boolean started;
        boolean closed;

        Member(String id, CuratorFramework client) {
            this.id = id;
            this.client = client;
        }

        Participant leader() throws Exception {
            return latch != null ? latch.getLeader() : selector.getLeader();
        }

        Collection<Participant> participants() throws Exception {
            return latch != null ? latch.getParticipants() : selector.getParticipants();
        }
    }

    static String path;

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String kind = args[1];
        path = args[2];
        Map<String, Member> members = new HashMap<>();
        for (int i = 3; i < args.length; i++) {
            String id = args[i];
            CuratorFramework client =
                    CuratorFrameworkFactory.newClient(connect, 10000, 5000, new ExponentialBackoffRetry(100, 10));
            client.start();
            if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection");
            Member m = new Member(id, client);
            if (kind.equals("latch")) {
                m.latch = new LeaderLatch(client, path, id);
                m.latch.addListener(new LeaderLatchListener() {
                    @Override
                    public void isLeader() {
                        long now = micros();
                        m.leadingSince.set(now);
                        say("ELECTED " + id + " " + now);
                    }

                    @Override
                    public void notLeader() {
                        m.leadingSince.set(0);
                        say("DEPOSED " + id + " " + micros());
                    }
                });
            } else if (kind.equals("selector")) {
                Semaphore never = new Semaphore(0);
                m.selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                    @Override
                    public void takeLeadership(CuratorFramework c) throws Exception {
                        say("ELECTED " + id + " " + micros());
                        try {
                            never.acquire(); // leads until interrupted (close, or the connection's loss)
                        } finally {
                            // Before the selector deletes its node: the end of our term.
                            say("DEPOSED " + id + " " + micros());
                        }
                    }
                });
                m.selector.setId(id);
            } else {
                throw new IllegalArgumentException("want latch or selector, not " + kind);
            }
            members.put(id, m);
        }
        say("READY");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("QUIT")) break;
            try {
                Member m = words.length > 1 ? members.get(words[1]) : null;
                if (m == null) throw new IllegalArgumentException("no participant in: " + line);
                switch (words[0]) {
                    case "START": start(m); say("STARTED " + m.id); break;
                    case "CLOSE": close(m); say("CLOSED " + m.id); break;
                    case "LEADER": {
                        Participant p = m.leader();
                        say("LEADER " + (p.getId().isEmpty() ? "-" : p.getId()) + " " + p.isLeader());
                        break;
                    }
                    case "PARTICIPANTS": {
                        StringBuilder out = new StringBuilder("PARTICIPANTS");
                        for (Participant p : m.participants()) out.append(' ').append(p.getId()).append(':').append(p.isLeader());
                        say(out.toString());
                        break;
                    }
                    case "TOKEN": say("TOKEN " + m.id + " " + token(m)); break;
                    default: throw new IllegalArgumentException("unknown command: " + line);
                }
            } catch (Exception e) {
                say("ERROR " + e);
            }
        }
        for (Member m : members.values()) {
            if (m.started && !m.closed) close(m);
            m.client.close();
        }
        say("BYE");
    }

    static void start(Member m) throws Exception {
        if (m.latch != null) m.latch.start();
        else m.selector.start();
        m.started = true;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (m.participants().stream().noneMatch(p -> p.getId().equals(m.id))) {
            if (System.nanoTime() > deadline) throw new IllegalStateException(m.id + "'s node never appeared");
            Thread.sleep(5); // poll interval
        }
    }

    static void close(Member m) throws Exception {
        m.closed = true;
        if (m.latch != null) {
            long end = micros();
            m.latch.close(); // silent: the listener hears nothing more
            long since = m.leadingSince.getAndSet(0);
            if (since != 0) say("DEPOSED " + m.id + " " + Math.max(end, since));
        } else {
            m.selector.close(); // interrupts takeLeadership, which says DEPOSED
        }
    }

    /** The czxid of the participant's node (the node whose data is its id), -1 if none. */
    static long token(Member m) throws Exception {
        for (String child : m.client.getChildren().forPath(path)) {
            String node = path + "/" + child;
            Stat stat = new Stat();
            try {
                byte[] data = m.client.getData().storingStatIn(stat).forPath(node);
                if (new String(data, StandardCharsets.UTF_8).equals(m.id)) return stat.getCzxid();
            } catch (org.apache.zookeeper.KeeperException.NoNodeException e) {
                // gone between the listing and the read
            }
        }
        return -1;
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static long micros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
    }
}
