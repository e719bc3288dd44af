package org.pyref.flink;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.state.AggregatingState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.operators.InternalTimerService;

/**
 * Every keyed state kind, TTL, POJO and Kryo values, four key types and pending timers, at
 * parallelism 3 (max parallelism set by the case, 1000). Users "user-00".."user-59" send
 * i % 4 + 1 events each, spread over the three source splits.
 */
final class KeyedKindsJob {
    static final int PARALLELISM = 3;
    static final int USERS = 60;
    /** Event-time timers are set after 2100-01-01: far past the final watermark. */
    static final long FAR_EVENT_TIME = 4_102_444_800_000L;
    static final long TEN_DAYS = 10L * 24 * 3600 * 1000;
    static final long TTL = 100L * 24 * 3600 * 1000;

    private KeyedKindsJob() {}

    static void build(JobBuilder b) {
        DataStream<Event> events = b.source("events-source", PARALLELISM, KeyedKindsJob::events);
        OperatorSpec kinds = new OperatorSpec("keyed-kinds", "String")
                .state(StateSpec.keyed("count", "value", "Long"))
                .state(StateSpec.keyed("history", "list", "String"))
                .state(StateSpec.map("buckets", "String", "Long"))
                .state(StateSpec.keyed("sum", "reducing", "Long").withFunction("sum"))
                .state(StateSpec.keyed("count-sum", "aggregating", "Tuple2<Long,Long>").withFunction("count-sum"))
                .state(StateSpec.keyed("stats", "value", "pojo:org.pyref.flink.PageStats"))
                .state(StateSpec.keyed("blob", "value", "kryo:org.pyref.flink.LegacyBlob"))
                .state(StateSpec.keyed("ttl-last", "value", "String").withTtl(TTL))
                .state(StateSpec.keyed("ttl-nums", "list", "Long").withTtl(TTL))
                .state(StateSpec.map("ttl-tags", "Integer", "String").withTtl(TTL))
                .timers("user-timers", "void");
        b.keyed(events, e -> e.key, kinds, new Kinds(), PARALLELISM);
        OperatorSpec longs = new OperatorSpec("long-keys", "Long")
                .state(StateSpec.keyed("last-user", "value", "String"))
                .state(StateSpec.keyed("max", "reducing", "Long").withFunction("max"));
        b.keyed(events, e -> e.num % 17, longs, new LongKeys(), PARALLELISM);
        OperatorSpec tuples = new OperatorSpec("tuple-keys", "Tuple2<String,Integer>")
                .state(StateSpec.keyed("nums", "list", "Long"))
                .state(StateSpec.map("by-seq", "Long", "Double"));
        b.keyed(events, e -> Tuple2.of(e.key, (int) (e.num % 2)), tuples, new TupleKeys(), PARALLELISM);
        OperatorSpec pojos = new OperatorSpec("pojo-keys", "pojo:org.pyref.flink.UserKey")
                .state(StateSpec.keyed("blobs", "list", "kryo:org.pyref.flink.LegacyBlob"))
                .state(StateSpec.keyed("count-sum", "aggregating", "Tuple2<Long,Long>").withFunction("count-sum"))
                .timers("user-timers", "void");
        b.keyed(events, e -> new UserKey("r" + (user(e) % 3), user(e)), pojos, new PojoKeys(), PARALLELISM);
    }

    static int user(Event e) {
        return Integer.parseInt(e.key.substring("user-".length()));
    }

    static List<Event> events(int split) {
        List<Event> out = new ArrayList<>();
        for (int i = 0; i < USERS; i++) {
            for (int j = 0; j <= i % 4; j++) {
                if ((i + j) % PARALLELISM == split) {
                    Event e = new Event(String.format("user-%02d", i), i * 10L + j, JobBuilder.END_WATERMARK + 1 + i * 1000L + j);
                    e.seq = i * 10L + j;
                    out.add(e);
                }
            }
        }
        return out;
    }

    static final class Kinds implements Behaviour {
        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Event e = (Event) element;
            ValueState<Long> count = op.state("count");
            boolean first = count.value() == null;
            count.update(first ? 1 : count.value() + 1);
            op.<ListState<String>>state("history").add("n" + e.num);
            MapState<String, Long> buckets = op.state("buckets");
            String bucket = "b" + e.num % 3;
            buckets.put(bucket, (buckets.contains(bucket) ? buckets.get(bucket) : 0L) + e.num);
            op.<ReducingState<Long>>state("sum").add(e.num);
            op.<AggregatingState<Object, Tuple2<Long, Long>>>state("count-sum").add(e.num);
            ValueState<PageStats> stats = op.state("stats");
            PageStats s = first ? new PageStats() : stats.value();
            s.views++;
            s.ratio = s.views / 4.0;
            s.lastUrl = "/u/" + e.key + "/" + e.num;
            stats.update(s);
            ValueState<LegacyBlob> blob = op.state("blob");  // absent in HeapKindsJob
            if (blob != null && e.num % 2 == 0) {
                blob.update(new LegacyBlob(e.key, new long[] {e.num, e.seq}));
            }
            op.<ValueState<String>>state("ttl-last").update("last-" + e.num);
            op.<ListState<Long>>state("ttl-nums").add(e.num);
            op.<MapState<Integer, String>>state("ttl-tags").put((int) (e.num % 5), "tag-" + e.num);
            if (first) {
                InternalTimerService<Object> timers = op.timers("user-timers");
                timers.registerEventTimeTimer(VoidNamespace.INSTANCE, FAR_EVENT_TIME + e.num);
                if (user(e) % 2 == 0) {
                    timers.registerProcessingTimeTimer(VoidNamespace.INSTANCE, timers.currentProcessingTime() + TEN_DAYS);
                }
            }
        }
    }

    static final class LongKeys implements Behaviour {
        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Event e = (Event) element;
            op.<ValueState<String>>state("last-user").update(e.key);
            op.<ReducingState<Long>>state("max").add(e.seq);
        }
    }

    static final class TupleKeys implements Behaviour {
        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Event e = (Event) element;
            op.<ListState<Long>>state("nums").add(e.num);
            op.<MapState<Long, Double>>state("by-seq").put(e.seq, e.num / 10.0);
        }
    }

    static final class PojoKeys implements Behaviour {
        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Event e = (Event) element;
            op.<ListState<LegacyBlob>>state("blobs").add(new LegacyBlob("u" + user(e), new long[] {e.num}));
            AggregatingState<Object, Tuple2<Long, Long>> countSum = op.state("count-sum");
            if (countSum.get() == null) {
                op.timers("user-timers").registerEventTimeTimer(VoidNamespace.INSTANCE, FAR_EVENT_TIME + user(e));
            }
            countSum.add(e.num);
        }
    }
}
