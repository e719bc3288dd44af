package org.pyref.flink;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.cep.CEP;
import org.apache.flink.cep.functions.PatternProcessFunction;
import org.apache.flink.cep.nfa.aftermatch.AfterMatchSkipStrategy;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.pattern.conditions.SimpleCondition;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;

/**
 * The CEP job: a {@link FixedSource} keyed by key into two CEP operators (event time), whose
 * matches are collected in this JVM as a multiset of strings per pattern ({@link #matches}):
 * <ul>
 *   <li>"followed-by": {@code begin("a").where(small).followedBy("b").where(large).within(WITHIN)}
 *       (no skip: every small event starts its own run, matched with the first large event after
 *       it if that comes within WITHIN ms);</li>
 *   <li>"run": {@code begin("a", skipPastLastEvent()).where(small).oneOrMore().consecutive()
 *       .next("b").where(large)} (a block of consecutive small events right before a large one:
 *       one match, the block from its first event).</li>
 * </ul>
 * Phase 1's final watermark leaves runs of both patterns partial (NFA state, shared buffer
 * entries and events) and its last events of each key after the watermark, in the operators'
 * queues of buffered events with their timers. Phase 2, restored from phase 1's savepoint,
 * continues: phase 1's matches plus phase 2's are the patterns over all of the input
 * ({@link #expected}) only if that state came back exactly.
 */
final class CepJob {
    private CepJob() {}

    static final String[] PATTERNS = {"followed-by", "run"};
    static final int SPLITS = 2;
    static final int KEYS = 6;
    /** Phase 1's events per key (the last two after its final watermark), then phase 2's. */
    static final int PHASE1_EVENTS = 12;
    static final int PHASE2_EVENTS = 12;
    static final long PHASE1_END = 10_000L;
    static final long PHASE2_END = 30_000L;
    static final long WITHIN = 3_500L;
    private static final long SMALL = 0;
    private static final long LARGE = 1;

    private static final Map<String, Map<String, Integer>> MATCHES = new ConcurrentHashMap<>();

    /** This job for Main's "cep" action. */
    static final PhasedJob PHASED = new PhasedJob() {
        @Override
        public String[] outputs() {
            return PATTERNS;
        }

        @Override
        public void build(StreamExecutionEnvironment env, int phase, int parallelism, int maxParallelism) {
            CepJob.build(env, phase, parallelism, maxParallelism);
        }

        @Override
        public Map<String, Map<String, Integer>> output() {
            return matches();
        }

        @Override
        public Map<String, Map<String, Integer>> expected(int phase) {
            return CepJob.expected(phase);
        }
    };

    /** Each key's events by seq: S small, L large, N neither. Phase 1 (seq 0-11) ends its processed
     * part (seq 0-9) in small events, so both patterns' runs are partial at its savepoint. */
    private static final String[] KINDS = {
        "SNSLSSLSSSLS" + "SSLNSSSLSLNS",
        "NSSLNSLNSSSL" + "LSSSLNSLSSLN",
        "SSSSLNSSSSNL" + "SLSSNLLSSSLN",
        "LNSLSLSNSLSS" + "LSNSSLSSSLNN",
        "SLSSSLNSSSSS" + "LNSSLSSSLSLS",
        "NNSSLSSNSSLL" + "SSSLNSLSNSSL",
    };

    /** Event seq of key k: 1000 ms apart (distinct per key); num mod 3 says small, large or neither. */
    private static Event event(int key, long seq) {
        Event e = new Event("k" + key, 3 * seq + "SLN".indexOf(KINDS[key].charAt((int) seq)), 1000L * seq + 100L + 10L * key);
        e.seq = seq;
        return e;
    }

    private static List<Event> events(int split, int phase) {
        List<Event> events = new ArrayList<>();
        for (int p = 1; p <= phase; p++) {
            for (int key = split; key < KEYS; key += SPLITS) {
                long from = p == 1 ? 0 : PHASE1_EVENTS;
                for (long seq = from; seq < from + (p == 1 ? PHASE1_EVENTS : PHASE2_EVENTS); seq++) {
                    events.add(event(key, seq));
                }
            }
            if (p < phase) {
                events.add(Event.end(PHASE1_END));  // phase 1's end marker, consumed before its savepoint
            }
        }
        return events;
    }

    private static SimpleCondition<Event> kind(long kind) {
        return new SimpleCondition<Event>() {
            private static final long serialVersionUID = 1L;

            @Override
            public boolean filter(Event e) {
                return e.num % 3 == kind;
            }
        };
    }

    static void build(StreamExecutionEnvironment env, int phase, int parallelism, int maxParallelism) {
        MATCHES.clear();
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxParallelism);
        long end = phase == 1 ? PHASE1_END : PHASE2_END;
        DataStream<Event> events = env.fromSource(FixedSource.idling("cep-source", SPLITS, split -> events(split, phase), end),
                        FixedSource.watermarks(), "cep-source").uid("cep-source").setParallelism(SPLITS)
                .filter(e -> !e.end).uid("cep-source-filter").setParallelism(SPLITS);
        KeyedStream<Event, String> keyed = events.keyBy(e -> e.key);
        Pattern<Event, Event> followedBy = Compat.within(Pattern.<Event>begin("a").where(kind(SMALL))
                .followedBy("b").where(kind(LARGE)), WITHIN);
        Pattern<Event, Event> run = Pattern.<Event>begin("a", AfterMatchSkipStrategy.skipPastLastEvent()).where(kind(SMALL))
                .oneOrMore().consecutive().next("b").where(kind(LARGE));
        CEP.pattern(keyed, followedBy).inEventTime().process(new Collect(PATTERNS[0])).uid("cep-followed-by");
        CEP.pattern(keyed, run).inEventTime().process(new Collect(PATTERNS[1])).uid("cep-run");
    }

    /** Adds each match ("key a=[seq, ...] b=[seq]") to its pattern's multiset. */
    private static final class Collect extends PatternProcessFunction<Event, Void> {
        private static final long serialVersionUID = 1L;
        private final String pattern;

        Collect(String pattern) {
            this.pattern = pattern;
        }

        @Override
        public void processMatch(Map<String, List<Event>> match, Context context, Collector<Void> out) {
            List<Long> a = new ArrayList<>(), b = new ArrayList<>();
            match.get("a").forEach(e -> a.add(e.seq));
            match.get("b").forEach(e -> b.add(e.seq));
            add(MATCHES.computeIfAbsent(pattern, p -> new TreeMap<>()), text(match.get("a").get(0).key, a, b));
        }
    }

    private static String text(String key, List<Long> a, List<Long> b) {
        return key + " a=" + a + " b=" + b;
    }

    private static void add(Map<String, Integer> multiset, String match) {
        synchronized (multiset) {
            multiset.merge(match, 1, Integer::sum);
        }
    }

    /** What each pattern matched so far in this JVM. */
    static Map<String, Map<String, Integer>> matches() {
        Map<String, Map<String, Integer>> copy = new TreeMap<>();
        for (String p : PATTERNS) {
            Map<String, Integer> found = MATCHES.getOrDefault(p, new TreeMap<>());
            synchronized (found) {
                copy.put(p, new TreeMap<>(found));
            }
        }
        return copy;
    }

    /** Both patterns over each key's events of phases 1 .. phase up to the phase's final watermark. */
    static Map<String, Map<String, Integer>> expected(int phase) {
        long watermark = phase == 1 ? PHASE1_END : PHASE2_END;
        Map<String, Integer> followed = new TreeMap<>(), runs = new TreeMap<>();
        for (int key = 0; key < KEYS; key++) {
            List<Event> seen = new ArrayList<>();
            for (long seq = 0; seq < PHASE1_EVENTS + (phase == 2 ? PHASE2_EVENTS : 0); seq++) {
                if (event(key, seq).ts <= watermark) {
                    seen.add(event(key, seq));
                }
            }
            for (int i = 0; i < seen.size(); i++) {
                Event e = seen.get(i);
                if (e.num % 3 != LARGE) {
                    continue;
                }
                for (int j = i - 1; j >= 0 && seen.get(j).num % 3 != LARGE; j--) {  // a: every small one since the last large
                    if (seen.get(j).num % 3 == SMALL && e.ts - seen.get(j).ts < WITHIN) {
                        add(followed, text(e.key, List.of(seen.get(j).seq), List.of(e.seq)));
                    }
                }
                int first = i;
                while (first > 0 && seen.get(first - 1).num % 3 == SMALL) {
                    first--;
                }
                if (first < i) {
                    List<Long> block = new ArrayList<>();
                    seen.subList(first, i).forEach(s -> block.add(s.seq));
                    add(runs, text(e.key, block, List.of(e.seq)));
                }
            }
        }
        Map<String, Map<String, Integer>> result = new TreeMap<>();
        result.put(PATTERNS[0], followed);
        result.put(PATTERNS[1], runs);
        return result;
    }
}
