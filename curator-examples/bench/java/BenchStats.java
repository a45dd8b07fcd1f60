// Statistics shared by the Java peers of the benchmarks (GroupBench, DiscoveryBench, LeaderBench,
// AtomicBench, QueueBench): nearest-rank percentiles of nanosecond samples, printed in microseconds
// as the harness's JSON lines want, and the server's request counter (zk_packets_received through
// mntr).

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

final class BenchStats {
    private BenchStats() {}

    /** Nearest rank of sorted nanosecond samples. */
    static long pct(long[] sorted, double p) {
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(1, Math.min(sorted.length, rank)) - 1];
    }

    /** Nanoseconds as microseconds with one decimal. */
    static String us(long ns) {
        return String.format(Locale.ROOT, "%.1f", Math.round(ns / 100.0) / 10.0);
    }

    /** For samples per client (one row each), the JSON arrays of each row's p50 and p99 in µs. */
    static String[] perClient(long[][] perClient) {
        StringBuilder per50 = new StringBuilder("["), per99 = new StringBuilder("[");
        for (int j = 0; j < perClient.length; j++) {
            long[] s = perClient[j].clone();
            Arrays.sort(s);
            per50.append(j > 0 ? "," : "").append(us(pct(s, 50)));
            per99.append(j > 0 ? "," : "").append(us(pct(s, 99)));
        }
        return new String[] {per50.append(']').toString(), per99.append(']').toString()};
    }

    /** zk_packets_received, once two readings 10 ms apart agree (or after 2 s). */
    static long quietPackets(String connect) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        long before = packets(connect);
        while (true) {
            Thread.sleep(10); // the quiet interval
            long now = packets(connect);
            if (now == before || System.nanoTime() > deadline) return now;
            before = now;
        }
    }

    /** mntr readings so far: the server counts each as a packet received. */
    static long readings;

    /** zk_packets_received less the mntr readings themselves. */
    static long packets(String connect) throws Exception {
        readings++;
        String[] hostPort = connect.split(",")[0].split(":");
        try (Socket socket = new Socket(hostPort[0], Integer.parseInt(hostPort[1]))) {
            socket.getOutputStream().write("mntr".getBytes(StandardCharsets.US_ASCII));
            socket.getOutputStream().flush();
            InputStream in = socket.getInputStream();
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[4096];
            for (int r; (r = in.read(buf)) > 0; ) out.write(buf, 0, r);
            for (String line : out.toString(StandardCharsets.UTF_8.name()).split("\n")) {
                String[] kv = line.split("\\s+");
                if (kv.length == 2 && kv[0].equals("zk_packets_received")) return Long.parseLong(kv[1]) - readings;
            }
        }
        throw new IllegalStateException("no zk_packets_received in mntr (is mntr in 4lw.commands.whitelist?)");
    }
}
