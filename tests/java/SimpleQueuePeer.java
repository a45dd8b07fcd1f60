// Interop peer for the Rust queue tests: Apache Curator 5.x's own SimpleDistributedQueue on the
// same path as Rust's. Items travel as hexadecimal, so that any bytes can be offered and compared.
//
// Usage: java SimpleQueuePeer <connect> <path>
// Prints READY, then answers each line of stdin:
//   OFFER <hex>    offers the bytes, prints OFFERED
//   TAKE           take() (waits for an item), prints "TOOK <hex>"
//   POLL <ms>      poll(ms), prints "TOOK <hex>" or NONE
//   QUIT           closes the client, prints BYE and exits.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class SimpleQueuePeer {
    private static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) {
            out.append(String.format("%02x", b & 0xff));
        }
        return out.toString();
    }

    private static byte[] unhex(String text) {
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client =
                CuratorFrameworkFactory.newClient(args[0], 10000, 5000, new ExponentialBackoffRetry(100, 10));
        client.start();
        client.blockUntilConnected();
        SimpleDistributedQueue queue = new SimpleDistributedQueue(client, args[1]);
        System.out.println("READY");
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.split(" ");
            if (words[0].equals("OFFER")) {
                queue.offer(unhex(words.length > 1 ? words[1] : ""));
                System.out.println("OFFERED");
            } else if (words[0].equals("TAKE")) {
                System.out.println("TOOK " + hex(queue.take()));
            } else if (words[0].equals("POLL")) {
                byte[] item = queue.poll(Long.parseLong(words[1]), TimeUnit.MILLISECONDS);
                System.out.println(item == null ? "NONE" : "TOOK " + hex(item));
            } else if (words[0].equals("QUIT")) {
                break;
            }
            System.out.flush();
        }
        client.close();
        System.out.println("BYE");
        System.out.flush();
    }
}
