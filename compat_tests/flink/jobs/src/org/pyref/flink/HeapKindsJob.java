package org.pyref.flink;

import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * The keyed-kinds job's "keyed-kinds" operator without its Kryo state: every state kind, TTL on
 * value, list and map, a POJO value and pending timers of both domains, all of types whose values
 * a heap checkpoint's readers can step over (a heap checkpoint stores no value lengths, so one
 * Kryo state hides the states after it). Same input and behaviour as {@link KeyedKindsJob}.
 */
final class HeapKindsJob {
    private HeapKindsJob() {}

    static void build(JobBuilder b) {
        DataStream<Event> events = b.source("events-source", KeyedKindsJob.PARALLELISM, KeyedKindsJob::events);
        OperatorSpec kinds = new OperatorSpec("keyed-kinds", "String")
                .state(StateSpec.keyed("count", "value", "Long"))
                .state(StateSpec.keyed("history", "list", "String"))
                .state(StateSpec.map("buckets", "String", "Long"))
                .state(StateSpec.keyed("sum", "reducing", "Long").withFunction("sum"))
                .state(StateSpec.keyed("count-sum", "aggregating", "Tuple2<Long,Long>").withFunction("count-sum"))
                .state(StateSpec.keyed("stats", "value", "pojo:org.pyref.flink.PageStats"))
                .state(StateSpec.keyed("ttl-last", "value", "String").withTtl(KeyedKindsJob.TTL))
                .state(StateSpec.keyed("ttl-nums", "list", "Long").withTtl(KeyedKindsJob.TTL))
                .state(StateSpec.map("ttl-tags", "Integer", "String").withTtl(KeyedKindsJob.TTL))
                .timers("user-timers", "void");
        b.keyed(events, e -> e.key, kinds, new KeyedKindsJob.Kinds(), KeyedKindsJob.PARALLELISM);
    }
}
