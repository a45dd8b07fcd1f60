// Statistics shared by the Java peers of the benchmarks (GroupBench, DiscoveryBench): nearest-rank
// percentiles of nanosecond samples, printed in microseconds as the harness's JSON lines want.

import java.util.Arrays;
import java.util.Locale;

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
}
