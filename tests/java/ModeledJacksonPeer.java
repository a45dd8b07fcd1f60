// Interop peer for the Rust modeled client: models written and read with Jackson configured as
// Curator's JacksonModelSerializer configures it (an ObjectMapper with its defaults, unknown
// properties ignored; writeValueAsBytes / readValue), stored with Curator 5.4's framework. The
// x-async jar that holds JacksonModelSerializer itself is not packaged by Debian; its work is
// these two calls on such a mapper.
//
// Usage: java ModeledJacksonPeer <connect>
// Prints READY, then answers each line of stdin:
//   BYTES <case>          "BYTES <the JSON Jackson writes for the case's model>" (one line: JSON
//                         escapes line breaks)
//   WRITE <case> <path>   writes the case's model to <path> (parents made); "WROTE"
//   READ <case> <path>    reads <path> as a Person; "EQUAL" if it equals the case's model, else
//                         "DIFFERENT <what Jackson wrote for what it read>"
//   QUIT                  answers BYE and exits
// A command that fails answers "ERROR <exception>".
// The cases: "full" (every field set) and "sparse" (nulls, empty list and map).

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class ModeledJacksonPeer {
    /** A nested object. */
    public static class Address {
        private String street;
        private int number;

        public Address() {}

        public Address(String street, int number) {
            this.street = street;
            this.number = number;
        }

        public String getStreet() { return street; }
        public void setStreet(String street) { this.street = street; }
        public int getNumber() { return number; }
        public void setNumber(int number) { this.number = number; }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Address)) return false;
            Address a = (Address) o;
            return number == a.number && Objects.equals(street, a.street);
        }

        @Override
        public int hashCode() { return Objects.hash(street, number); }
    }

    /** The model: Java bean properties, in declaration order. */
    public static class Person {
        private String firstName;
        private int age;
        private long id;
        private boolean active;
        private String nickname;
        private Address home;
        private Address previousHome;
        private List<String> tags;
        private List<Address> visited;
        private Map<String, Integer> scores;

        public Person() {}

        public String getFirstName() { return firstName; }
        public void setFirstName(String v) { firstName = v; }
        public int getAge() { return age; }
        public void setAge(int v) { age = v; }
        public long getId() { return id; }
        public void setId(long v) { id = v; }
        public boolean isActive() { return active; }
        public void setActive(boolean v) { active = v; }
        public String getNickname() { return nickname; }
        public void setNickname(String v) { nickname = v; }
        public Address getHome() { return home; }
        public void setHome(Address v) { home = v; }
        public Address getPreviousHome() { return previousHome; }
        public void setPreviousHome(Address v) { previousHome = v; }
        public List<String> getTags() { return tags; }
        public void setTags(List<String> v) { tags = v; }
        public List<Address> getVisited() { return visited; }
        public void setVisited(List<Address> v) { visited = v; }
        public Map<String, Integer> getScores() { return scores; }
        public void setScores(Map<String, Integer> v) { scores = v; }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Person)) return false;
            Person p = (Person) o;
            return age == p.age && id == p.id && active == p.active && Objects.equals(firstName, p.firstName)
                    && Objects.equals(nickname, p.nickname) && Objects.equals(home, p.home)
                    && Objects.equals(previousHome, p.previousHome) && Objects.equals(tags, p.tags)
                    && Objects.equals(visited, p.visited) && Objects.equals(scores, p.scores);
        }

        @Override
        public int hashCode() { return Objects.hash(firstName, age, id); }
    }

    static Person model(String name) {
        Person p = new Person();
        switch (name) {
            case "full": {
                p.setFirstName("Zoë \"Z\" O'Brien\\ a/b\ttab");
                p.setAge(-42);
                p.setId(9007199254740993L);
                p.setActive(true);
                p.setNickname("zed");
                p.setHome(new Address("1 Galt's Gulch", 7));
                p.setPreviousHome(new Address("Old Trafford", 10));
                p.setTags(new ArrayList<>(Arrays.asList("b", "a", "日本")));
                p.setVisited(new ArrayList<>(Arrays.asList(new Address("x", 1), new Address("y", 2))));
                TreeMap<String, Integer> scores = new TreeMap<>();
                scores.put("math", 90);
                scores.put("art", -1);
                scores.put("Zed", 0);
                p.setScores(scores);
                return p;
            }
            case "sparse": {
                p.setFirstName("");
                p.setAge(0);
                p.setId(0);
                p.setActive(false);
                p.setNickname(null);
                p.setHome(new Address(null, 0));
                p.setPreviousHome(null);
                p.setTags(new ArrayList<>());
                p.setVisited(new ArrayList<>());
                p.setScores(new TreeMap<>());
                return p;
            }
            default:
                throw new IllegalArgumentException("no case " + name);
        }
    }

    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        mapper.configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
        CuratorFramework client =
                CuratorFrameworkFactory.newClient(args[0], 10000, 5000, new ExponentialBackoffRetry(100, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection");
        say("READY");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("QUIT")) break;
            try {
                switch (w[0]) {
                    case "BYTES":
                        say("BYTES " + new String(mapper.writeValueAsBytes(model(w[1])), StandardCharsets.UTF_8));
                        break;
                    case "WRITE":
                        client.create().orSetData().creatingParentsIfNeeded()
                                .forPath(w[2], mapper.writerFor(Person.class).writeValueAsBytes(model(w[1])));
                        say("WROTE");
                        break;
                    case "READ": {
                        Person read = mapper.readerFor(Person.class).readValue(client.getData().forPath(w[2]));
                        say(read.equals(model(w[1]))
                                ? "EQUAL"
                                : "DIFFERENT " + new String(mapper.writeValueAsBytes(read), StandardCharsets.UTF_8));
                        break;
                    }
                    default:
                        say("ERROR unknown command " + w[0]);
                }
            } catch (Exception e) {
                say("ERROR " + e.toString().replace('\n', ' '));
            }
        }
        client.close();
        say("BYE");
    }

    /** Standard output in UTF-8, whatever the platform's default charset. */
    static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

    static synchronized void say(String line) {
        OUT.println(line);
        OUT.flush();
    }
}
