package org.pyref.flink;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.v2.ListState;
import org.apache.flink.api.common.state.v2.ListStateDescriptor;
import org.apache.flink.api.common.state.v2.MapState;
import org.apache.flink.api.common.state.v2.MapStateDescriptor;
import org.apache.flink.api.common.state.v2.ReducingState;
import org.apache.flink.api.common.state.v2.ReducingStateDescriptor;
import org.apache.flink.api.common.state.v2.ValueState;
import org.apache.flink.api.common.state.v2.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * The async state API (Flink 2.0+: {@code KeyedStream.enableAsyncState()}, the
 * {@code org.apache.flink.api.common.state.v2} descriptors), which only ForSt runs asynchronously:
 * "async-counter" (parallelism 2, String keys "a0".."a19", three events each) keeps ValueState
 * "count", ListState "nums", MapState "by-parity" ("even"/"odd" -> the key's last such number) and
 * ReducingState "sum", each updated through the state's futures, and sets an event-time and a
 * processing-time timer per event, both far past the job's end (so they stay pending, at
 * timestamps the input decides). Its truth is derived from the fixed input (the
 * operator is Flink's, not a SpecOperator that dumps what it holds); a probe after it reports done
 * once the final watermark passed it, after every record's state requests completed.
 */
final class AsyncStateJob {
    static final int PARALLELISM = 2;
    static final int KEYS = 20;
    static final int EVENTS = 60;
    /** Timers are set after 2100-01-01: far past the final watermark and the job's processing time. */
    static final long FAR = 4_102_444_800_000L;

    private AsyncStateJob() {}

    static void build(JobBuilder b) {
        DataStream<Event> events = b.source("async-source", 1, split -> input());
        b.declare("async-counter", PARALLELISM, "String");
        DataStream<Event> counted = events.keyBy(e -> e.key, Types.<String>of("String")).enableAsyncState()
                .process(new Counter()).uid("async-counter").name("async-counter").setParallelism(PARALLELISM);
        b.probe(counted, "async-probe");
        truth(b.maxParallelism);
    }

    private static List<Event> input() {
        List<Event> out = new ArrayList<>();
        for (int i = 0; i < EVENTS; i++) {
            out.add(new Event("a" + (i % KEYS), i, i));
        }
        return out;
    }

    static final class Counter extends KeyedProcessFunction<String, Event, Event> {
        private transient ValueState<Long> count;
        private transient ListState<Long> nums;
        private transient MapState<String, Long> byParity;
        private transient ReducingState<Long> sum;

        @Override
        public void open(OpenContext context) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", BasicTypeInfo.LONG_TYPE_INFO));
            nums = getRuntimeContext().getListState(new ListStateDescriptor<>("nums", BasicTypeInfo.LONG_TYPE_INFO));
            byParity = getRuntimeContext().getMapState(new MapStateDescriptor<>("by-parity",
                    BasicTypeInfo.STRING_TYPE_INFO, BasicTypeInfo.LONG_TYPE_INFO));
            sum = getRuntimeContext().getReducingState(new ReducingStateDescriptor<>("sum", Long::sum,
                    BasicTypeInfo.LONG_TYPE_INFO));
        }

        @Override
        public void processElement(Event e, Context ctx, Collector<Event> out) {
            count.asyncValue().thenCompose(c -> count.asyncUpdate(c == null ? 1L : c + 1));
            nums.asyncAdd(e.num);
            byParity.asyncPut(e.num % 2 == 0 ? "even" : "odd", e.num);
            sum.asyncAdd(e.num);
            ctx.timerService().registerEventTimeTimer(FAR + e.num);
            ctx.timerService().registerProcessingTimeTimer(FAR + 1000 + e.num);
            out.collect(e);
        }
    }

    /** What "async-counter" holds once every event is processed. */
    private static void truth(int maxParallelism) {
        Map<String, List<Long>> byKey = new TreeMap<>();
        for (Event e : input()) {
            byKey.computeIfAbsent(e.key, k -> new ArrayList<>()).add(e.num);
        }
        ObjectNode part = Truth.part("async-counter", 0);
        ObjectNode states = part.putObject("keyed_state");
        ArrayNode counts = entries(states, StateSpec.keyed("count", "value", "Long"));
        ArrayNode lists = entries(states, StateSpec.keyed("nums", "list", "Long"));
        ArrayNode maps = entries(states, StateSpec.map("by-parity", "String", "Long"));
        ArrayNode sums = entries(states, StateSpec.keyed("sum", "reducing", "Long").withFunction("sum"));
        part.putObject("timer_services").putObject("user-timers").put("namespace", "void");
        ArrayNode timers = part.putArray("timers");
        for (Map.Entry<String, List<Long>> k : byKey.entrySet()) {
            List<Long> nums = k.getValue();
            Map<String, Long> parity = new TreeMap<>();
            ArrayNode list = Json.array();
            long total = 0;
            int subtask = KeyGroupRangeAssignment.assignKeyToParallelOperator(k.getKey(), maxParallelism, PARALLELISM);
            for (long n : nums) {
                parity.put(n % 2 == 0 ? "even" : "odd", n);
                list.add(Json.value(n));
                total += n;
                timers.add(StateDump.timer("user-timers", "event_time", k.getKey(), null, FAR + n, maxParallelism, subtask));
                timers.add(StateDump.timer("user-timers", "processing_time", k.getKey(), null, FAR + 1000 + n,
                        maxParallelism, subtask));
            }
            ArrayNode pairs = Json.array();
            parity.forEach((p, n) -> pairs.addArray().add(p).add(Json.value(n)));
            entry(counts, k.getKey(), maxParallelism).set("value", Json.value((long) nums.size()));
            entry(lists, k.getKey(), maxParallelism).set("value", list);
            entry(maps, k.getKey(), maxParallelism).set("value", pairs);
            entry(sums, k.getKey(), maxParallelism).set("value", Json.value(total));
        }
        Truth.put(Truth.FROM_INPUT, part);
    }

    private static ArrayNode entries(ObjectNode states, StateSpec spec) {
        ObjectNode state = spec.toJson();
        state.put("source", "input");
        states.set(spec.name, state);
        return state.putArray("entries");
    }

    private static ObjectNode entry(ArrayNode entries, String key, int maxParallelism) {
        ObjectNode e = entries.addObject();
        e.set("key", Json.value(key));
        e.set("namespace", Json.value(null));
        e.put("key_group", KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism));
        e.put("subtask", KeyGroupRangeAssignment.assignKeyToParallelOperator(key, maxParallelism, PARALLELISM));
        return e;
    }
}
