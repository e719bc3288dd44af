package org.pyref.flink;

import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * A job run in two phases (see Main's "sql" and "cep" actions): phase 1 over the first half of
 * its input, stopped with a savepoint; phase 2, restored from it, over the rest. Its output is
 * collected in this JVM as a signed multiset of rows per query (or pattern): phase 1's plus
 * phase 2's must be {@link #expected} over the whole input.
 */
interface PhasedJob {
    /** The queries (or patterns) whose output is collected. */
    String[] outputs();

    void build(StreamExecutionEnvironment env, int phase, int parallelism, int maxParallelism);

    /** This JVM's output so far: query -> row -> signed count. */
    Map<String, Map<String, Integer>> output();

    /** The output of the input of phases 1 .. phase, after the phase's final watermark. */
    Map<String, Map<String, Integer>> expected(int phase);

    /** Two outputs added up (rows whose count comes to 0 dropped). */
    default Map<String, Map<String, Integer>> plus(Map<String, Map<String, Integer>> a, Map<String, Map<String, Integer>> b) {
        Map<String, Map<String, Integer>> sum = new TreeMap<>();
        for (String q : outputs()) {
            Map<String, Integer> rows = new TreeMap<>(a.getOrDefault(q, Map.of()));
            b.getOrDefault(q, Map.of()).forEach((row, n) -> {
                if (rows.merge(row, n, Integer::sum) == 0) {
                    rows.remove(row);
                }
            });
            sum.put(q, rows);
        }
        return sum;
    }
}
