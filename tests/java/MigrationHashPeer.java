import java.security.MessageDigest;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.transaction.CuratorOp;
import org.apache.curator.framework.imps.ExtractingCuratorOp;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.CreateMode;

/**
 * Prints the SHA-256 that Curator's MigrationManager records for each of a fixed list of
 * transaction operations (one line each, in hex), then for all of them as one migration
 * ("all <hex>"). Arguments: the namespace, or "-" for none, and a connect string (a namespace
 * makes Curator ensure its node before it builds an operation; the operations are not sent).
 */
public class MigrationHashPeer {
    public static void main(String[] args) throws Exception {
        String namespace = args[0].equals("-") ? null : args[0];
        CuratorFramework client = CuratorFrameworkFactory.builder().connectString(args[1])
            .namespace(namespace).retryPolicy(new RetryOneTime(1)).build();
        client.start();
        CuratorOp[] ops = {
            client.transactionOp().create().forPath("/a/b", "hello".getBytes("UTF-8")),
            client.transactionOp().create().withMode(CreateMode.PERSISTENT_SEQUENTIAL)
                .forPath("/a/x,y%z}", new byte[] {0, (byte) 0x80, 0x7f, 10}),
            client.transactionOp().create().withMode(CreateMode.EPHEMERAL).forPath("/a/e", new byte[0]),
            client.transactionOp().create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath("/a/es-", new byte[] {1}),
            client.transactionOp().create().withMode(CreateMode.CONTAINER).forPath("/a/c", new byte[] {2}),
            client.transactionOp().delete().forPath("/a/b"),
            client.transactionOp().delete().withVersion(3).forPath("/a/d"),
            client.transactionOp().setData().forPath("/a/f", "x".getBytes("UTF-8")),
            client.transactionOp().setData().withVersion(7).forPath("/a/g", new byte[0]),
            client.transactionOp().check().forPath("/a/h"),
            client.transactionOp().check().withVersion(2).forPath("/a/i"),
        };
        MessageDigest all = MessageDigest.getInstance("SHA-256");
        for (CuratorOp op : ops) {
            MessageDigest one = MessageDigest.getInstance("SHA-256");
            ((ExtractingCuratorOp) op).addToDigest(one);
            ((ExtractingCuratorOp) op).addToDigest(all);
            System.out.println(hex(one.digest()));
        }
        System.out.println("all " + hex(all.digest()));
        System.out.flush();
        // Nothing was sent; do not wait for the client's connection attempts to wind down.
        System.exit(0);
    }

    private static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) {
            out.append(String.format("%02x", b));
        }
        return out.toString();
    }
}
