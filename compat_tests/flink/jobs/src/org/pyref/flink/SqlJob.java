package org.pyref.flink;

import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.Collector;

/**
 * The SQL job: a {@link FixedSource} turned into a table (event time from the source's watermarks)
 * and three queries whose state is the table runtime's (RowData keys and values): a group
 * aggregate, a TUMBLE window aggregate (windows after the final watermark stay pending) and a
 * regular join with a STATE_TTL hint. Each query's changelog is collected in this JVM as a signed
 * multiset of rows ({@link #changelog}).
 *
 * Phase 1 emits the first half of the input and idles; phase 2 (restored from phase 1's savepoint)
 * continues every split where its position stands and emits the second half: phase 1's changelog
 * plus phase 2's is then the query over all of the input ({@link #expected}) only if the state
 * was restored exactly.
 */
final class SqlJob {
    private SqlJob() {}

    static final String[] QUERIES = {"group-aggregate", "window-aggregate", "join"};
    static final int SPLITS = 2;
    static final int KEYS = 6;
    /** Phase 1's final watermark: windows of [8000, 12000) and later stay pending. */
    static final long PHASE1_END = 10_000L;
    static final long PHASE2_END = 30_000L;
    static final long WINDOW = 4_000L;

    private static final Map<String, Map<String, Integer>> CHANGELOG = new ConcurrentHashMap<>();

    private static final class Input {
        final String key;
        final long v;
        final long seq;
        final long ts;

        Input(int key, long seq, long ts) {
            this.key = "k" + key;
            this.seq = seq;
            this.v = 10L * key + seq;
            this.ts = ts;
        }
    }

    /** The rows of key j: seq 0 .. j+2 in phase 1 (some after its final watermark), three more in
     * phase 2, all after phase 1's final watermark (none late). */
    private static List<Input> input(int phase) {
        List<Input> rows = new ArrayList<>();
        for (int key = 0; key < KEYS; key++) {
            if (phase == 1) {
                for (long seq = 0; seq < key + 3; seq++) {
                    rows.add(new Input(key, seq, 2000L * seq + 100L * key));
                }
            } else {
                for (long i = 0; i < 3; i++) {
                    rows.add(new Input(key, key + 3 + i, PHASE1_END + 1000L + 2000L * i + 100L * key));
                }
            }
        }
        return rows;
    }

    private static List<Event> events(int split, int phase) {
        List<Event> events = new ArrayList<>();
        for (int p = 1; p <= phase; p++) {
            for (Input in : input(p)) {
                if (Integer.parseInt(in.key.substring(1)) % SPLITS == split) {
                    Event e = new Event(in.key, in.v, in.ts);
                    e.seq = in.seq;
                    events.add(e);
                }
            }
            if (p < phase) {
                events.add(Event.end(PHASE1_END));  // phase 1's end marker, consumed before its savepoint
            }
        }
        return events;
    }

    static void build(StreamExecutionEnvironment env, int phase, int parallelism, int maxParallelism) {
        CHANGELOG.clear();
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxParallelism);
        long end = phase == 1 ? PHASE1_END : PHASE2_END;
        DataStream<Event> events = env.fromSource(FixedSource.idling("sql-source", SPLITS, split -> events(split, phase), end),
                        FixedSource.watermarks(), "sql-source").uid("sql-source").setParallelism(SPLITS)
                .filter(e -> !e.end).uid("sql-source-filter").setParallelism(SPLITS);
        StreamTableEnvironment tables = StreamTableEnvironment.create(env);
        tables.getConfig().getConfiguration().setString("table.local-time-zone", "UTC");
        tables.createTemporaryView("events", tables.fromDataStream(events, Schema.newBuilder()
                .columnByMetadata("rowtime", "TIMESTAMP_LTZ(3)")
                .watermark("rowtime", "SOURCE_WATERMARK()")
                .build()));
        tables.createTemporaryView("t", tables.sqlQuery(
                "SELECT `key` AS k, num AS v, seq, CONCAT('s', CAST(num AS STRING)) AS s, rowtime FROM events"));
        String[] sql = {
            "SELECT k, COUNT(*) AS c, SUM(v) AS total, MAX(s) AS m FROM t GROUP BY k",
            "SELECT k, window_start, window_end, COUNT(*) AS c, SUM(v) AS total "
                    + "FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), INTERVAL '4' SECOND)) "
                    + "GROUP BY k, window_start, window_end",
            "SELECT /*+ STATE_TTL('a' = '1h', 'b' = '1h') */ a.k, a.seq, b.seq "
                    + "FROM t AS a JOIN t AS b ON a.k = b.k AND a.seq = b.seq + 1",
        };
        for (int i = 0; i < QUERIES.length; i++) {
            tables.toChangelogStream(tables.sqlQuery(sql[i])).process(new Collect(QUERIES[i])).name("collect-" + QUERIES[i]);
        }
    }

    /** Adds each changelog row to its query's signed multiset (+1 for +I/+U, -1 for -U/-D). */
    private static final class Collect extends ProcessFunction<Row, Void> {
        private static final long serialVersionUID = 1L;
        private final String query;

        Collect(String query) {
            this.query = query;
        }

        @Override
        public void processElement(Row row, Context context, Collector<Void> out) {
            int sign = row.getKind() == RowKind.INSERT || row.getKind() == RowKind.UPDATE_AFTER ? 1 : -1;
            row.setKind(RowKind.INSERT);
            add(CHANGELOG.computeIfAbsent(query, q -> new TreeMap<>()), row.toString(), sign);
        }
    }

    private static void add(Map<String, Integer> multiset, String row, int n) {
        synchronized (multiset) {
            if (multiset.merge(row, n, Integer::sum) == 0) {
                multiset.remove(row);
            }
        }
    }

    /** What each query's changelog added up to so far in this JVM. */
    static Map<String, Map<String, Integer>> changelog() {
        Map<String, Map<String, Integer>> copy = new TreeMap<>();
        for (String q : QUERIES) {
            Map<String, Integer> rows = CHANGELOG.getOrDefault(q, new TreeMap<>());
            synchronized (rows) {
                copy.put(q, new TreeMap<>(rows));
            }
        }
        return copy;
    }

    /** The two changelogs added up (a restored run's after its savepoint's). */
    static Map<String, Map<String, Integer>> plus(Map<String, Map<String, Integer>> a, Map<String, Map<String, Integer>> b) {
        Map<String, Map<String, Integer>> sum = new TreeMap<>();
        for (String q : QUERIES) {
            Map<String, Integer> rows = new TreeMap<>(a.getOrDefault(q, Map.of()));
            b.getOrDefault(q, Map.of()).forEach((row, n) -> add(rows, row, n));
            sum.put(q, rows);
        }
        return sum;
    }

    /** Each query over the input of phases 1 .. phase, after the phase's final watermark. */
    static Map<String, Map<String, Integer>> expected(int phase) {
        List<Input> rows = new ArrayList<>(input(1));
        if (phase == 2) {
            rows.addAll(input(2));
        }
        long watermark = phase == 1 ? PHASE1_END : PHASE2_END;
        Map<String, Map<String, Integer>> result = new TreeMap<>();
        Map<String, long[]> groups = new TreeMap<>();
        Map<String, String> max = new TreeMap<>();
        Map<List<Object>, long[]> windows = new TreeMap<>((a, b) -> a.toString().compareTo(b.toString()));
        Map<String, Integer> joined = new TreeMap<>();
        for (Input in : rows) {
            long[] g = groups.computeIfAbsent(in.key, k -> new long[2]);
            g[0]++;
            g[1] += in.v;
            max.merge(in.key, "s" + in.v, (x, y) -> x.compareTo(y) >= 0 ? x : y);
            long start = in.ts - in.ts % WINDOW;
            if (start + WINDOW - 1 <= watermark) {
                long[] w = windows.computeIfAbsent(List.of(in.key, start), k -> new long[2]);
                w[0]++;
                w[1] += in.v;
            }
            for (Input other : rows) {
                if (other.key.equals(in.key) && in.seq == other.seq + 1) {
                    add(joined, Row.of(in.key, in.seq, other.seq).toString(), 1);
                }
            }
        }
        Map<String, Integer> aggregates = new TreeMap<>();
        groups.forEach((k, g) -> add(aggregates, Row.of(k, g[0], g[1], max.get(k)).toString(), 1));
        Map<String, Integer> fired = new TreeMap<>();
        windows.forEach((kw, w) -> {
            long start = (Long) kw.get(1);
            add(fired, Row.of(kw.get(0), time(start), time(start + WINDOW), w[0], w[1]).toString(), 1);
        });
        result.put(QUERIES[0], aggregates);
        result.put(QUERIES[1], fired);
        result.put(QUERIES[2], joined);
        return result;
    }

    private static LocalDateTime time(long millis) {
        return LocalDateTime.ofEpochSecond(millis / 1000, 0, ZoneOffset.UTC);
    }
}
