// Interop peer for the Rust discovery model: Apache Curator 5.4's own JsonInstanceSerializer on
// the instances of tests/tests/discovery_json_interop.rs (the same cases, built the same way).
//
// Usage: java DiscoveryJsonPeer
// Prints "ADDRESS <first IPv4 address of ServiceInstanceBuilder.getAllLocalIPs(), or none>",
// then "WRITE <case> <json>" for each case as Curator serializes it, then "END". Then, for each
// line "<case> <json>" on stdin, reads the JSON with Curator's serializer and prints
// "READ <case> equal" (or "READ <case> different <what Curator read>") and
// "URI <case> <buildUriSpec() of what it read>". Exits at the end of stdin.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceInstanceBuilder;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.UriSpec;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;

public class DiscoveryJsonPeer {
    /** A typed payload; the Rust side names it "DiscoveryJsonPeer$Details". */
    public static class Details {
        private String zone;
        private int weight;

        public Details() {}

        public Details(String zone, int weight) {
            this.zone = zone;
            this.weight = weight;
        }

        public String getZone() { return zone; }
        public void setZone(String zone) { this.zone = zone; }
        public int getWeight() { return weight; }
        public void setWeight(int weight) { this.weight = weight; }

        @Override
        public boolean equals(Object o) {
            return o instanceof Details && Objects.equals(zone, ((Details) o).zone) && weight == ((Details) o).weight;
        }

        @Override
        public int hashCode() { return Objects.hash(zone, weight); }

        @Override
        public String toString() { return "Details{" + zone + "," + weight + "}"; }
    }

    static final Map<String, ServiceInstance<Object>> CASES = new LinkedHashMap<>();
    static final Map<String, JsonInstanceSerializer<Object>> SERIALIZERS = new LinkedHashMap<>();

    static void add(String name, ServiceInstance<Object> instance, boolean compatible) {
        CASES.put(name, instance);
        SERIALIZERS.put(name, new JsonInstanceSerializer<Object>(Object.class, compatible));
    }

    public static void main(String[] args) throws Exception {
        TreeMap<String, Object> map = new TreeMap<>();
        map.put("region", "eu-1");
        map.put("tags", new ArrayList<>(Arrays.asList("a", "b")));
        map.put("weight", 3);
        add("map", new ServiceInstance<Object>("search", "3f5e7a0c-0000-4000-8000-000000000001", "10.0.0.7", 8080,
                null, map, 1700000000000L, ServiceType.DYNAMIC, new UriSpec("{scheme}://{address}:{port}/{name}"),
                true), true);
        add("string", new ServiceInstance<Object>("search", "s-2", "host.example", null, 8443,
                "hello \"world\" \u00e9\u0001\u001f", 1700000000001L, ServiceType.STATIC,
                new UriSpec("{scheme}://{address}:{ssl-port}/{[}x{]}/{service-type}/{id}"), true), true);
        add("none", new ServiceInstance<Object>("bare", "b-3", null, null, null, null, 0L, ServiceType.PERMANENT,
                null, true), true);
        add("list", new ServiceInstance<Object>("search", "l-4", "10.0.0.8", 1, 2,
                new ArrayList<Object>(Arrays.asList("a", 1, 2.5)), 1700000000002L, ServiceType.DYNAMIC_SEQUENTIAL,
                new UriSpec("{scheme}://{address}:{port}"), false), false);
        add("typed", new ServiceInstance<Object>("search", "t-5", "10.0.0.9", 80, null,
                new Details("eu-2", 7), 1700000000003L, ServiceType.DYNAMIC, null, true), true);
        add("long", new ServiceInstance<Object>("search", "n-6", "10.0.0.10", 81, null, 5000000000L,
                1700000000004L, ServiceType.DYNAMIC, null, true), true);
        add("double", new ServiceInstance<Object>("search", "d-7", "10.0.0.11", 82, null, 1.0E20,
                -1L, ServiceType.DYNAMIC, null, true), true);

        String address = "none";
        for (InetAddress ip : ServiceInstanceBuilder.getAllLocalIPs()) {
            if (ip instanceof Inet4Address) {
                address = ip.getHostAddress();
                break;
            }
        }
        System.out.println("ADDRESS " + address);
        for (Map.Entry<String, ServiceInstance<Object>> c : CASES.entrySet()) {
            byte[] json = SERIALIZERS.get(c.getKey()).serialize(c.getValue());
            System.out.println("WRITE " + c.getKey() + " " + new String(json, StandardCharsets.UTF_8));
        }
        System.out.println("END");
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            int space = line.indexOf(' ');
            String name = line.substring(0, space);
            byte[] json = line.substring(space + 1).getBytes(StandardCharsets.UTF_8);
            ServiceInstance<Object> read = SERIALIZERS.get(name).deserialize(json);
            ServiceInstance<Object> expected = CASES.get(name);
            System.out.println("READ " + name + (expected.equals(read) ? " equal" : " different " + read));
            System.out.println("URI " + name + " " + read.buildUriSpec());
            System.out.flush();
        }
    }
}
