package org.pyref.flink;

import java.math.BigDecimal;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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
 * and the queries whose state real SQL jobs keep (the table runtime's RowData keys and values): a
 * group aggregate, a TUMBLE window aggregate (windows after the final watermark stay pending), a
 * regular join with a STATE_TTL hint, deduplication (keep first and keep last by rowtime), Top-N,
 * a group aggregate with COUNT(DISTINCT) and TIMESTAMP/DECIMAL accumulators, a HOP window
 * aggregate and a legacy GROUP BY TUMBLE window (both with a COUNT(DISTINCT): a MapView per window),
 * an interval join, deduplication of rows with ARRAY and MAP columns, COLLECT (a MULTISET) and
 * ARRAY_AGG, MAX and Top-N over an updating input (a MapView; a SortedMap) and an OVER aggregation
 * over the two preceding rows, and a MATCH_RECOGNIZE (the CEP operator over RowData events, partial
 * matches and buffered rows pending at the savepoint). Each query's changelog is collected in this
 * JVM as a signed multiset of rows ({@link #changelog}).
 *
 * Phase 1 emits the first half of the input and idles; phase 2 (restored from phase 1's savepoint)
 * continues every split where its position stands and emits the second half: phase 1's changelog
 * plus phase 2's is then the query over all of the input ({@link #expected}) only if the state
 * was restored exactly.
 */
final class SqlJob {
    private SqlJob() {}

    static final String[] QUERIES = {"group-aggregate", "window-aggregate", "join", "dedup-first", "dedup-last",
        "top-n", "distinct-aggregate", "hop-window", "legacy-window", "interval-join", "collections-dedup",
        "collect", "array-agg", "max-retract", "top-n-updating", "over-rows", "match-recognize"};
    static final int SPLITS = 2;
    static final int KEYS = 6;
    /** Phase 1's final watermark: windows of [8000, 12000) and later stay pending. */
    static final long PHASE1_END = 10_000L;
    static final long PHASE2_END = 30_000L;
    static final long WINDOW = 4_000L;
    static final long HOP_SLIDE = 2_000L;
    static final int TOP_N = 3;
    /** The interval join's bound: a.rowtime within this many ms of b.rowtime. */
    static final long INTERVAL = 5_000L;
    /** The OVER aggregation's frame: this many rows before the current one. */
    static final int PRECEDING = 2;
    /** MATCH_RECOGNIZE's row classes by seq mod 4: PATTERN (A B+ C) matches A, B, B, C in rowtime order. */
    static final String MATCH_CLASSES = "ABBC";

    private static final Map<String, Map<String, Integer>> CHANGELOG = new ConcurrentHashMap<>();

    /** This job for Main's "sql" action. */
    static final PhasedJob PHASED = new PhasedJob() {
        @Override
        public String[] outputs() {
            return QUERIES;
        }

        @Override
        public void build(StreamExecutionEnvironment env, int phase, int parallelism, int maxParallelism) {
            SqlJob.build(env, phase, parallelism, maxParallelism);
        }

        @Override
        public Map<String, Map<String, Integer>> output() {
            return changelog();
        }

        @Override
        public Map<String, Map<String, Integer>> expected(int phase) {
            return SqlJob.expected(phase);
        }
    };

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
            "SELECT k, seq FROM (SELECT k, seq, ROW_NUMBER() OVER (PARTITION BY k ORDER BY rowtime ASC) AS rn FROM t) "
                    + "WHERE rn = 1",
            "SELECT k, seq FROM (SELECT k, seq, ROW_NUMBER() OVER (PARTITION BY k ORDER BY rowtime DESC) AS rn FROM t) "
                    + "WHERE rn = 1",
            "SELECT k, seq, rn FROM (SELECT k, seq, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM t) "
                    + "WHERE rn <= " + TOP_N,
            "SELECT MOD(seq, 3) AS g, COUNT(DISTINCT k) AS dk, MAX(rowtime) AS mt, MAX(CAST(rowtime AS TIMESTAMP(6))) AS mt6, "
                    + "SUM(CAST(v AS DECIMAL(12, 2))) AS dv, MAX(CAST(v AS DECIMAL(10, 1))) AS mv FROM t GROUP BY MOD(seq, 3)",
            "SELECT k, window_start, window_end, COUNT(*) AS c, SUM(v) AS total, COUNT(DISTINCT MOD(seq, 2)) AS parities "
                    + "FROM TABLE(HOP(TABLE t, DESCRIPTOR(rowtime), INTERVAL '2' SECOND, INTERVAL '4' SECOND)) "
                    + "GROUP BY k, window_start, window_end",
            "SELECT k, COUNT(*) AS c, SUM(v) AS total, COUNT(DISTINCT MOD(seq, 2)) AS parities "
                    + "FROM t GROUP BY k, TUMBLE(rowtime, INTERVAL '4' SECOND)",
            "SELECT a.k, a.seq, b.seq FROM t AS a, t AS b WHERE a.k = b.k AND a.seq = b.seq + 2 "
                    + "AND a.rowtime BETWEEN b.rowtime - INTERVAL '5' SECOND AND b.rowtime + INTERVAL '5' SECOND",
            // rows with ARRAY and MAP columns kept by deduplication (ArrayData / MapData in its RowData)
            "SELECT k, arr, m FROM (SELECT k, ARRAY[v, seq] AS arr, MAP['v', v] AS m, "
                    + "ROW_NUMBER() OVER (PARTITION BY k ORDER BY rowtime DESC) AS rn FROM t) WHERE rn = 1",
            "SELECT k, COLLECT(seq) AS c FROM t GROUP BY k",
            "SELECT k, ARRAY_AGG(seq) AS a FROM t GROUP BY k",
            // MAX over an updating input (retractions: MaxWithRetract's MapView)
            "SELECT g, MAX(k) AS mk FROM (SELECT k, MOD(COUNT(*), 2) AS g FROM t GROUP BY k) GROUP BY g",
            // Top-N over an updating input whose sort key grows against its order (RetractableTopN's SortedMap),
            // its rows with a MULTISET column (MapData)
            "SELECT k, c, ps, rn FROM (SELECT k, c, ps, ROW_NUMBER() OVER (ORDER BY c ASC, k ASC) AS rn "
                    + "FROM (SELECT k, COUNT(*) AS c, COLLECT(MOD(seq, 2)) AS ps FROM t GROUP BY k)) WHERE rn <= " + TOP_N,
            // MIN over a bounded frame retracts the rows leaving it (MinWithRetract's MapView)
            "SELECT k, seq, SUM(v) OVER w AS s, MIN(v) OVER w AS lo FROM t WINDOW w AS (PARTITION BY k "
                    + "ORDER BY rowtime ROWS BETWEEN " + PRECEDING + " PRECEDING AND CURRENT ROW)",
            // CEP over RowData: at phase 1's savepoint most keys hold a partial match (A, A B B) and
            // rows after its watermark wait in the operator's queue; rows of both phases interleave in time
            "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY rowtime "
                    + "MEASURES A.seq AS a, FIRST(B.seq) AS b1, LAST(B.seq) AS bn, COUNT(B.seq) AS nb, C.seq AS c "
                    + "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C) "
                    + "DEFINE A AS MOD(A.seq, 4) = 0, B AS MOD(B.seq, 4) IN (1, 2), C AS MOD(C.seq, 4) = 3)",
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

    /** Each query over the input of phases 1 .. phase, after the phase's final watermark. */
    static Map<String, Map<String, Integer>> expected(int phase) {
        List<Input> rows = new ArrayList<>(input(1));
        if (phase == 2) {
            rows.addAll(input(2));
        }
        long watermark = phase == 1 ? PHASE1_END : PHASE2_END;
        Map<String, List<Input>> byKey = new TreeMap<>();
        for (Input in : rows) {
            byKey.computeIfAbsent(in.key, k -> new ArrayList<>()).add(in);
        }
        Map<String, Map<String, Integer>> result = new TreeMap<>();
        Map<String, Integer> aggregates = new TreeMap<>();
        Map<String, Integer> first = new TreeMap<>();
        Map<String, Integer> last = new TreeMap<>();
        Map<String, Integer> top = new TreeMap<>();
        Map<String, Integer> joined = new TreeMap<>();
        Map<String, Integer> intervalJoined = new TreeMap<>();
        Map<String, Integer> legacy = new TreeMap<>();
        Map<String, Integer> collections = new TreeMap<>();
        Map<String, Integer> collected = new TreeMap<>();
        Map<String, Integer> arrays = new TreeMap<>();
        Map<String, Integer> over = new TreeMap<>();
        Map<String, Integer> matches = new TreeMap<>();
        Map<Long, String> maxByParity = new TreeMap<>();
        byKey.forEach((k, group) -> {
            long total = group.stream().mapToLong(in -> in.v).sum();
            String max = group.stream().map(in -> "s" + in.v).max(Comparator.naturalOrder()).get();
            add(aggregates, Row.of(k, (long) group.size(), total, max).toString(), 1);
            Comparator<Input> byTime = Comparator.comparingLong(in -> in.ts);
            add(first, Row.of(k, group.stream().min(byTime).get().seq).toString(), 1);
            add(last, Row.of(k, group.stream().max(byTime).get().seq).toString(), 1);
            List<Input> byValue = new ArrayList<>(group);
            byValue.sort(Comparator.comparingLong((Input in) -> in.v).reversed());
            for (int rank = 1; rank <= Math.min(TOP_N, byValue.size()); rank++) {
                add(top, Row.of(k, byValue.get(rank - 1).seq, (long) rank).toString(), 1);
            }
            for (Input a : group) {
                for (Input b : group) {
                    if (a.seq == b.seq + 1) {
                        add(joined, Row.of(k, a.seq, b.seq).toString(), 1);
                    }
                    if (a.seq == b.seq + 2 && Math.abs(a.ts - b.ts) <= INTERVAL) {
                        add(intervalJoined, Row.of(k, a.seq, b.seq).toString(), 1);
                    }
                }
            }
            windows(group, WINDOW, watermark).forEach((start, w) ->
                    add(legacy, Row.of(k, (long) w.size(), sum(w), parities(w)).toString(), 1));
            Input latest = group.stream().max(byTime).get();
            add(collections, Row.of(k, new Long[] {latest.v, latest.seq}, Map.of("v", latest.v)).toString(), 1);
            Map<Long, Integer> multiset = new TreeMap<>();
            group.forEach(in -> multiset.merge(in.seq, 1, Integer::sum));
            add(collected, Row.of(k, multiset).toString(), 1);
            add(arrays, Row.of(k, (Object) group.stream().map(in -> in.seq).toArray(Long[]::new)).toString(), 1);
            maxByParity.merge((long) group.size() % 2, k, (a, b) -> a.compareTo(b) >= 0 ? a : b);
            // The OVER aggregation's last triggering time starts at 0: a row at time 0 is late, dropped.
            List<Input> inTime = new ArrayList<>(group);
            inTime.removeIf(in -> in.ts <= 0);
            inTime.sort(byTime);
            for (int i = 0; i < inTime.size(); i++) {
                if (inTime.get(i).ts <= watermark) {
                    List<Input> frame = inTime.subList(Math.max(0, i - PRECEDING), i + 1);
                    long min = frame.stream().mapToLong(in -> in.v).min().getAsLong();
                    add(over, Row.of(k, inTime.get(i).seq, sum(frame), min).toString(), 1);
                }
            }
            match(k, group, watermark).forEach(row -> add(matches, row.toString(), 1));
        });
        Map<String, Integer> maxRetract = new TreeMap<>();
        maxByParity.forEach((g, k) -> add(maxRetract, Row.of(g, k).toString(), 1));
        List<String> byCount = new ArrayList<>(byKey.keySet());
        byCount.sort(Comparator.comparingInt((String k) -> byKey.get(k).size()).thenComparing(k -> k));
        Map<String, Integer> topUpdating = new TreeMap<>();
        for (int rank = 1; rank <= Math.min(TOP_N, byCount.size()); rank++) {
            List<Input> group = byKey.get(byCount.get(rank - 1));
            Map<Long, Integer> parities = new TreeMap<>();
            group.forEach(in -> parities.merge(in.seq % 2, 1, Integer::sum));
            add(topUpdating, Row.of(byCount.get(rank - 1), (long) group.size(), parities, (long) rank).toString(), 1);
        }
        result.put("group-aggregate", aggregates);
        result.put("window-aggregate", windowRows(byKey, WINDOW, watermark));
        result.put("join", joined);
        result.put("dedup-first", first);
        result.put("dedup-last", last);
        result.put("top-n", top);
        result.put("distinct-aggregate", distinctAggregate(rows));
        result.put("hop-window", windowRows(byKey, HOP_SLIDE, watermark));
        result.put("legacy-window", legacy);
        result.put("interval-join", intervalJoined);
        result.put("collections-dedup", collections);
        result.put("collect", collected);
        result.put("array-agg", arrays);
        result.put("max-retract", maxRetract);
        result.put("top-n-updating", topUpdating);
        result.put("over-rows", over);
        result.put("match-recognize", matches);
        return result;
    }

    /** MATCH_RECOGNIZE's rows for one key: its rows up to the watermark in rowtime order (CEP waits
     * for the watermark), their classes disjoint, so each A B+ C run is one match. */
    private static List<Row> match(String k, List<Input> group, long watermark) {
        List<Input> inTime = new ArrayList<>(group);
        inTime.removeIf(in -> in.ts > watermark);
        inTime.sort(Comparator.comparingLong(in -> in.ts));
        StringBuilder classes = new StringBuilder();
        inTime.forEach(in -> classes.append(MATCH_CLASSES.charAt((int) (in.seq % MATCH_CLASSES.length()))));
        List<Row> rows = new ArrayList<>();
        Matcher m = Pattern.compile("AB+C").matcher(classes);
        while (m.find()) {
            List<Input> run = inTime.subList(m.start(), m.end());
            rows.add(Row.of(k, run.get(0).seq, run.get(1).seq, run.get(run.size() - 2).seq, (long) run.size() - 2,
                    run.get(run.size() - 1).seq));
        }
        return rows;
    }

    /** The windows of size WINDOW every {@code slide} ms that fired by {@code watermark}: start -> rows. */
    private static Map<Long, List<Input>> windows(List<Input> group, long slide, long watermark) {
        Map<Long, List<Input>> windows = new TreeMap<>();
        for (Input in : group) {
            for (long start = in.ts - in.ts % slide; start > in.ts - WINDOW; start -= slide) {
                if (start + WINDOW - 1 <= watermark) {
                    windows.computeIfAbsent(start, s -> new ArrayList<>()).add(in);
                }
            }
        }
        return windows;
    }

    private static long sum(List<Input> rows) {
        return rows.stream().mapToLong(in -> in.v).sum();
    }

    /** COUNT(DISTINCT MOD(seq, 2)). */
    private static long parities(List<Input> rows) {
        return rows.stream().map(in -> in.seq % 2).distinct().count();
    }

    /** A window TVF's rows (HOP's with the parities of its rows, which its distinct view counted). */
    private static Map<String, Integer> windowRows(Map<String, List<Input>> byKey, long slide, long watermark) {
        Map<String, Integer> fired = new TreeMap<>();
        byKey.forEach((k, group) -> windows(group, slide, watermark).forEach((start, w) -> {
            Row row = Row.of(k, time(start), time(start + WINDOW), (long) w.size(), sum(w));
            add(fired, (slide == WINDOW ? row : Row.join(row, Row.of(parities(w)))).toString(), 1);
        }));
        return fired;
    }

    /** The DISTINCT / TIMESTAMP / DECIMAL aggregate, grouped by seq mod 3. */
    private static Map<String, Integer> distinctAggregate(List<Input> rows) {
        Map<Long, List<Input>> groups = new TreeMap<>();
        for (Input in : rows) {
            groups.computeIfAbsent(in.seq % 3, g -> new ArrayList<>()).add(in);
        }
        Map<String, Integer> out = new TreeMap<>();
        groups.forEach((g, group) -> {
            long distinctKeys = group.stream().map(in -> in.key).distinct().count();
            long maxTs = group.stream().mapToLong(in -> in.ts).max().getAsLong();
            long sum = group.stream().mapToLong(in -> in.v).sum();
            long maxV = group.stream().mapToLong(in -> in.v).max().getAsLong();
            add(out, Row.of(g, distinctKeys, Instant.ofEpochMilli(maxTs),
                    LocalDateTime.ofInstant(Instant.ofEpochMilli(maxTs), ZoneOffset.UTC),
                    BigDecimal.valueOf(sum).setScale(2), BigDecimal.valueOf(maxV).setScale(1)).toString(), 1);
        });
        return out;
    }

    private static LocalDateTime time(long millis) {
        return LocalDateTime.ofEpochSecond(millis / 1000, 0, ZoneOffset.UTC);
    }
}
