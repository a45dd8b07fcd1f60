// Interop peer for the Rust membership tests: Apache Curator 5.x's own GroupMember on the same
// path as Rust GroupMembers.
//
// Usage: java GroupPeer <connect> <path> <id> <payload>
// Joins the group, prints READY, then answers each line of stdin:
//   MEMBERS  prints "MEMBERS id=payload id=payload ..." (sorted by id) as its GroupMember sees them
//   QUIT     leaves the group, closes the client, prints BYE and exits.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class GroupPeer {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        String id = args[2];
        byte[] payload = args[3].getBytes(StandardCharsets.UTF_8);

        CuratorFramework client =
                CuratorFrameworkFactory.newClient(connect, 10000, 5000, new ExponentialBackoffRetry(100, 10));
        client.start();
        client.blockUntilConnected();
        GroupMember member = new GroupMember(client, path, id, payload);
        member.start();
        System.out.println("READY");
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("MEMBERS")) {
                StringBuilder out = new StringBuilder("MEMBERS");
                for (Map.Entry<String, byte[]> e : new TreeMap<>(member.getCurrentMembers()).entrySet()) {
                    out.append(' ').append(e.getKey()).append('=')
                            .append(new String(e.getValue(), StandardCharsets.UTF_8));
                }
                System.out.println(out);
                System.out.flush();
            } else if (line.equals("QUIT")) {
                break;
            }
        }
        member.close();
        client.close();
        System.out.println("BYE");
        System.out.flush();
    }
}
