// Interop peer for the Rust service discovery: Apache Curator 5.4's own ServiceDiscovery,
// ServiceProvider and JsonInstanceSerializer on the same base path as Rust's.
//
// Usage: java DiscoveryPeer <connect> <basePath>
// Starts a ServiceDiscovery<Map> (JsonInstanceSerializer<Map>: Jackson reads an object payload
// without "@class" as a LinkedHashMap, one with "@class" as that class), prints READY, then
// answers each line of stdin:
//   REGISTER <json>      registers an instance built with ServiceInstance.builder() from the
//                        JSON object's fields name, id, address, port, sslPort, payload (an
//                        object), uriSpec (a template), serviceType (optional); prints
//                        "REGISTERED <instance>" (the registration time is the builder's).
//   QUERY <name>         queryForInstances(name): "INSTANCE <instance>" per instance, sorted by
//                        id, then "END".
//   PROVIDE <name> <n>   the name's round-robin ServiceProvider (built and started on first use):
//                        getAllInstances() as "INSTANCE <instance>" lines sorted by id, then n
//                        getInstance() picks as "PICK <id> <buildUriSpec()>", then "END".
//   AWAIT <name> <ids>   polls the name's ServiceProvider (every 20 ms, up to 30 s) until the ids
//                        of getAllInstances() are exactly <ids> (comma separated, "-" for none);
//                        prints "SEEN <ids>" or "TIMEOUT <ids seen>".
//   EDIT <json>          builds an instance as REGISTER does and writes it with Curator's
//                        serializer to basePath/name/id with setData (as TestWatchedInstances
//                        edits a registration's node from another client); prints
//                        "EDITED <instance>".
//   UNREGISTER <id>      unregisterService() of the instance this peer registered with that id;
//                        prints "UNREGISTERED <id>".
//   QUIT                 closes the providers, the discovery and the client; prints BYE, exits.
// <instance> is one line of JSON: name, id, address, port, sslPort, payload (as Jackson writes the
// Java object, no type information), payloadClass (the Java class Curator read, or null),
// registrationTimeUTC, serviceType, uriSpec ({"parts":[..]} or null), enabled, uri
// (buildUriSpec()).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceInstanceBuilder;
import org.apache.curator.x.discovery.ServiceProvider;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.UriSpec;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.apache.curator.x.discovery.strategies.RoundRobinStrategy;

@SuppressWarnings("rawtypes")
public class DiscoveryPeer {
    static final ObjectMapper MAPPER = new ObjectMapper();

    static String describe(ServiceInstance<Map> instance) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("name", instance.getName());
        out.put("id", instance.getId());
        out.put("address", instance.getAddress());
        out.put("port", instance.getPort());
        out.put("sslPort", instance.getSslPort());
        Object payload = instance.getPayload();
        out.put("payload", payload);
        out.put("payloadClass", payload == null ? null : payload.getClass().getName());
        out.put("registrationTimeUTC", instance.getRegistrationTimeUTC());
        out.put("serviceType", instance.getServiceType() == null ? null : instance.getServiceType().name());
        out.put("uriSpec", instance.getUriSpec());
        out.put("enabled", instance.isEnabled());
        out.put("uri", instance.buildUriSpec());
        return MAPPER.writeValueAsString(out);
    }

    static List<ServiceInstance<Map>> sorted(java.util.Collection<ServiceInstance<Map>> instances) {
        List<ServiceInstance<Map>> list = new ArrayList<>(instances);
        list.sort(Comparator.comparing(ServiceInstance::getId));
        return list;
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String basePath = args[1];

        CuratorFramework client =
                CuratorFrameworkFactory.newClient(connect, 10000, 5000, new ExponentialBackoffRetry(100, 10));
        client.start();
        client.blockUntilConnected();
        JsonInstanceSerializer<Map> serializer = new JsonInstanceSerializer<Map>(Map.class);
        ServiceDiscovery<Map> discovery = ServiceDiscoveryBuilder.builder(Map.class)
                .client(client)
                .basePath(basePath)
                .serializer(serializer)
                .build();
        discovery.start();
        Map<String, ServiceInstance<Map>> registered = new HashMap<>();
        Map<String, ServiceProvider<Map>> providers = new HashMap<>();
        System.out.println("READY");
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.split(" ", 2);
            String command = words[0];
            String rest = words.length > 1 ? words[1] : "";
            if (command.equals("REGISTER")) {
                ServiceInstance<Map> instance = build(MAPPER.readTree(rest));
                discovery.registerService(instance);
                registered.put(instance.getId(), instance);
                System.out.println("REGISTERED " + describe(instance));
            } else if (command.equals("EDIT")) {
                ServiceInstance<Map> instance = build(MAPPER.readTree(rest));
                byte[] bytes = serializer.serialize(instance);
                client.setData().forPath(ZKPaths.makePath(basePath, instance.getName(), instance.getId()), bytes);
                System.out.println("EDITED " + describe(instance));
            } else if (command.equals("QUERY")) {
                for (ServiceInstance<Map> instance : sorted(discovery.queryForInstances(rest))) {
                    System.out.println("INSTANCE " + describe(instance));
                }
                System.out.println("END");
            } else if (command.equals("PROVIDE")) {
                String[] nameAndCount = rest.split(" ");
                ServiceProvider<Map> provider = provider(discovery, providers, nameAndCount[0]);
                for (ServiceInstance<Map> instance : sorted(provider.getAllInstances())) {
                    System.out.println("INSTANCE " + describe(instance));
                }
                int picks = Integer.parseInt(nameAndCount[1]);
                for (int i = 0; i < picks; i++) {
                    ServiceInstance<Map> picked = provider.getInstance();
                    System.out.println(picked == null ? "PICK none" : "PICK " + picked.getId() + " " + picked.buildUriSpec());
                }
                System.out.println("END");
            } else if (command.equals("AWAIT")) {
                String[] nameAndIds = rest.split(" ");
                ServiceProvider<Map> provider = provider(discovery, providers, nameAndIds[0]);
                TreeSet<String> want = new TreeSet<>();
                if (!nameAndIds[1].equals("-")) {
                    want.addAll(Arrays.asList(nameAndIds[1].split(",")));
                }
                long deadline = System.currentTimeMillis() + 30_000;
                TreeSet<String> seen = new TreeSet<>();
                while (true) {
                    seen.clear();
                    for (ServiceInstance<Map> instance : provider.getAllInstances()) {
                        seen.add(instance.getId());
                    }
                    if (seen.equals(want) || System.currentTimeMillis() > deadline) {
                        break;
                    }
                    Thread.sleep(20); // poll interval, bounded by the deadline
                }
                String ids = seen.isEmpty() ? "-" : String.join(",", seen);
                System.out.println((seen.equals(want) ? "SEEN " : "TIMEOUT ") + ids);
            } else if (command.equals("UNREGISTER")) {
                ServiceInstance<Map> instance = registered.remove(rest);
                if (instance != null) {
                    discovery.unregisterService(instance);
                }
                System.out.println("UNREGISTERED " + rest);
            } else if (command.equals("QUIT")) {
                break;
            } else {
                System.out.println("UNKNOWN " + line);
            }
            System.out.flush();
        }
        for (ServiceProvider<Map> provider : providers.values()) {
            provider.close();
        }
        discovery.close();
        client.close();
        System.out.println("BYE");
        System.out.flush();
    }

    /** An instance from the spec's fields, as REGISTER and EDIT describe. */
    static ServiceInstance<Map> build(JsonNode spec) throws Exception {
        ServiceInstanceBuilder<Map> builder = ServiceInstance.<Map>builder()
                .name(spec.get("name").asText())
                .id(spec.get("id").asText())
                .address(spec.get("address").asText())
                .payload(MAPPER.convertValue(spec.get("payload"), LinkedHashMap.class))
                .uriSpec(new UriSpec(spec.get("uriSpec").asText()));
        // The builder's ports are ints: a missing one stays null.
        if (spec.hasNonNull("port")) {
            builder.port(spec.get("port").intValue());
        }
        if (spec.hasNonNull("sslPort")) {
            builder.sslPort(spec.get("sslPort").intValue());
        }
        if (spec.hasNonNull("serviceType")) {
            builder.serviceType(ServiceType.valueOf(spec.get("serviceType").asText()));
        }
        return builder.build();
    }

    static ServiceProvider<Map> provider(ServiceDiscovery<Map> discovery, Map<String, ServiceProvider<Map>> providers,
            String name) throws Exception {
        ServiceProvider<Map> provider = providers.get(name);
        if (provider == null) {
            provider = discovery.serviceProviderBuilder()
                    .serviceName(name)
                    .providerStrategy(new RoundRobinStrategy<Map>())
                    .build();
            provider.start();
            providers.put(name, provider);
        }
        return provider;
    }
}
