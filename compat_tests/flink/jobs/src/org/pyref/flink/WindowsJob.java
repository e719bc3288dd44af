package org.pyref.flink;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;

/**
 * Windows with pending contents at parallelism 1: event-time tumbling with reduce, sliding with
 * aggregate and allowed lateness, tumbling with a process function (contents kept as a list),
 * a count window (GlobalWindow namespace, with its trigger's "count" state),
 * plus a keyed state of ~40 KB of payloads (above Flink's default inline threshold of 20 KB). Every reading's event time is after the final
 * watermark, so no window has fired; the window contents and timers are computed from the
 * readings exactly as Flink's WindowOperator assigns and reduces them.
 */
final class WindowsJob {
    static final int SENSORS = 20;
    static final long TUMBLING = 10_000, SLIDING = 20_000, SLIDE = 5_000, LATENESS = 3_000, PROCESS_WINDOW = 30_000;
    static final int PAYLOAD_CHARS = 400;
    /** More readings than any sensor sends: every count window is pending. */
    static final long COUNT_WINDOW = 100;

    private WindowsJob() {}

    @SuppressWarnings("unchecked")
    static void build(JobBuilder b) {
        DataStream<Event> readings = b.source("readings-source", 1, WindowsJob::readings);
        TypeInformation<Tuple2<String, Long>> pairType = Types.of("Tuple2<String,Long>");
        DataStream<Tuple2<String, Long>> pairs = readings.map(e -> Tuple2.of(e.key, e.num)).returns(pairType)
                .uid("to-pairs").name("to-pairs").setParallelism(1);
        b.declare("to-pairs", 1, null);
        SingleOutputStreamOperator<Tuple2<String, Long>> tumbling = pairs.keyBy(t -> t.f0, Types.<String>of("String"))
                .window(Compat.tumbling(TUMBLING))
                .reduce((ReduceFunction<Tuple2<String, Long>>) Functions.reduce("sum-f1"))
                .uid("tumbling-reduce").name("tumbling-reduce").setParallelism(1);
        b.declare("tumbling-reduce", 1, "String");
        b.probe(tumbling, "tumbling-reduce-probe");

        SingleOutputStreamOperator<Tuple2<Long, Long>> sliding = Compat.allowedLateness(
                        readings.keyBy(WindowsJob::sensor, Types.<Long>of("Long"))
                                .window(Compat.sliding(SLIDING, SLIDE)), LATENESS)
                .aggregate(new CountSum()).uid("sliding-aggregate").name("sliding-aggregate").setParallelism(1);
        b.declare("sliding-aggregate", 1, "Long");
        b.probe(sliding, "sliding-aggregate-probe");

        SingleOutputStreamOperator<Long> process = readings
                .keyBy(e -> Tuple2.of(e.key, (int) (e.num % 2)), Types.<Tuple2<String, Integer>>of("Tuple2<String,Integer>"))
                .window(Compat.tumbling(PROCESS_WINDOW))
                .process(new CountWindow()).uid("tumbling-process").name("tumbling-process").setParallelism(1);
        b.declare("tumbling-process", 1, "Tuple2<String,Integer>");
        b.probe(process, "tumbling-process-probe");

        SingleOutputStreamOperator<Tuple2<String, Long>> counting = pairs.keyBy(t -> t.f0, Types.<String>of("String"))
                .countWindow(COUNT_WINDOW)
                .reduce((ReduceFunction<Tuple2<String, Long>>) Functions.reduce("sum-f1"))
                .uid("count-reduce").name("count-reduce").setParallelism(1);
        b.declare("count-reduce", 1, "String");
        b.probe(counting, "count-reduce-probe");

        OperatorSpec payloads = new OperatorSpec("payloads", "String").state(StateSpec.keyed("payload", "value", "String"));
        b.keyed(readings, e -> e.key + "/" + e.seq, payloads, new Payloads(), 1);

        windowTruth(readings(0), b.maxParallelism);
    }

    /**
     * The time-window operator ``uid`` of this job as a restore job builds it over ``source`` (which
     * carries no records): the same key type, assigner, function and so the same window state and
     * timers, with a {@link Fired} window function (the state does not depend on it) that records
     * each window firing after the restore.
     */
    @SuppressWarnings("unchecked")
    static SingleOutputStreamOperator<String> restore(DataStream<Event> source, String uid, int parallelism) {
        SingleOutputStreamOperator<String> out;
        switch (uid) {
            case "tumbling-reduce":
                TypeInformation<Tuple2<String, Long>> pairType = Types.of("Tuple2<String,Long>");
                out = source.map(e -> Tuple2.of(e.key, e.num)).returns(pairType).uid("pyref-restore-pairs")
                        .setParallelism(parallelism)
                        .keyBy(t -> t.f0, Types.<String>of("String"))
                        .window(Compat.tumbling(TUMBLING))
                        .reduce((ReduceFunction<Tuple2<String, Long>>) Functions.reduce("sum-f1"),
                                new Fired<Tuple2<String, Long>, String>(uid, false), Types.<String>of("String"));
                break;
            case "sliding-aggregate":
                out = Compat.allowedLateness(source.keyBy(WindowsJob::sensor, Types.<Long>of("Long"))
                                .window(Compat.sliding(SLIDING, SLIDE)), LATENESS)
                        .aggregate(new CountSum(), new Fired<Tuple2<Long, Long>, Long>(uid, false));
                break;
            case "tumbling-process":
                out = source.keyBy(e -> Tuple2.of(e.key, (int) (e.num % 2)),
                                Types.<Tuple2<String, Integer>>of("Tuple2<String,Integer>"))
                        .window(Compat.tumbling(PROCESS_WINDOW))
                        .process(new Fired<Event, Tuple2<String, Integer>>(uid, true));
                break;
            default:
                throw new IllegalArgumentException("no window operator " + uid + " in the windows job");
        }
        return out.uid(uid).setParallelism(parallelism);
    }

    /** A window function that records what fires: key, window and the result (for contents kept as a list: how many). */
    static final class Fired<T, K> extends ProcessWindowFunction<T, String, K, TimeWindow> {
        private final String uid;
        private final boolean count;

        Fired(String uid, boolean count) {
            this.uid = uid;
            this.count = count;
        }

        @Override
        public void process(K key, Context ctx, Iterable<T> contents, Collector<String> out) {
            long n = 0;
            T last = null;
            for (T c : contents) {
                n++;
                last = c;
            }
            ObjectNode fired = Json.object();
            fired.set("key", Json.value(key));
            fired.putObject("window").put("start", ctx.window().getStart()).put("end", ctx.window().getEnd());
            fired.set("result", count ? Json.value(n) : Json.value(last));
            ObjectNode part = Truth.part(uid, Compat.subtask(getRuntimeContext()));
            part.putArray("fired_windows").add(fired);
            Truth.put(Truth.RESTORED, part);
        }
    }

    static long sensor(Event e) {
        return e.num / 100;
    }

    /** Sensor s sends 3 + s % 5 readings, all after the final watermark. */
    static List<Event> readings(int split) {
        List<Event> out = new ArrayList<>();
        long seq = 0;
        for (int s = 0; s < SENSORS; s++) {
            for (int j = 0; j < 3 + s % 5; j++) {
                Event e = new Event(String.format("sensor-%02d", s), s * 100L + j,
                        JobBuilder.END_WATERMARK + 1 + (s * 7L + j * 13L) * 1000L);
                e.seq = seq++;
                out.add(e);
            }
        }
        return out;
    }

    static final class CountSum implements AggregateFunction<Event, Tuple2<Long, Long>, Tuple2<Long, Long>> {
        private final Functions.CountSum f = new Functions.CountSum();

        @Override
        public Tuple2<Long, Long> createAccumulator() {
            return f.createAccumulator();
        }

        @Override
        public Tuple2<Long, Long> add(Event e, Tuple2<Long, Long> acc) {
            return f.add(e, acc);
        }

        @Override
        public Tuple2<Long, Long> getResult(Tuple2<Long, Long> acc) {
            return acc;
        }

        @Override
        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return f.merge(a, b);
        }
    }

    static final class CountWindow extends ProcessWindowFunction<Event, Long, Tuple2<String, Integer>, TimeWindow> {
        @Override
        public void process(Tuple2<String, Integer> key, Context ctx, Iterable<Event> events, Collector<Long> out) {
            long n = 0;
            for (Event ignored : events) {
                n++;
            }
            out.collect(n);
        }
    }

    static final class Payloads implements Behaviour {
        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Event e = (Event) element;
            Random random = new Random(e.seq);
            StringBuilder sb = new StringBuilder(PAYLOAD_CHARS);
            for (int i = 0; i < PAYLOAD_CHARS; i++) {
                sb.append(Character.forDigit(random.nextInt(16), 16));
            }
            op.<ValueState<String>>state("payload").update(sb.toString());
        }
    }

    /** The windows' pending contents, trigger state and timers, as Flink's WindowOperator holds them after these readings. */
    @SuppressWarnings("unchecked")
    private static void windowTruth(List<Event> readings, int maxParallelism) {
        Map<Tuple2<Object, Object>, Object> reduced = new LinkedHashMap<>(), aggregated = new LinkedHashMap<>(),
                listed = new LinkedHashMap<>(), counted = new LinkedHashMap<>(), counts = new LinkedHashMap<>();
        for (Event e : readings) {
            TimeWindow t = window(e.ts, TUMBLING, TUMBLING);
            reduced.merge(Tuple2.of(e.key, t), Tuple2.of(e.key, e.num),
                    (a, x) -> Tuple2.of(e.key, ((Tuple2<String, Long>) a).f1 + e.num));
            for (long start = window(e.ts, SLIDE, SLIDE).getStart(); start > e.ts - SLIDING; start -= SLIDE) {
                aggregated.merge(Tuple2.of(sensor(e), new TimeWindow(start, start + SLIDING)), Tuple2.of(1L, e.num),
                        (a, x) -> Tuple2.of(((Tuple2<Long, Long>) a).f0 + 1, ((Tuple2<Long, Long>) a).f1 + e.num));
            }
            Tuple2<String, Integer> processKey = Tuple2.of(e.key, (int) (e.num % 2));
            ((List<Event>) listed.computeIfAbsent(Tuple2.of(processKey, window(e.ts, PROCESS_WINDOW, PROCESS_WINDOW)),
                    k -> new ArrayList<Event>())).add(e);
            counted.merge(Tuple2.of(e.key, GlobalWindow.get()), Tuple2.of(e.key, e.num),
                    (a, x) -> Tuple2.of(e.key, ((Tuple2<String, Long>) a).f1 + e.num));
            counts.merge(Tuple2.of(e.key, GlobalWindow.get()), 1L, (a, x) -> (Long) a + 1);
        }
        put("tumbling-reduce", maxParallelism, 0, StateSpec.keyed("window-contents", "reducing", "Tuple2<String,Long>")
                .withFunction("sum-f1").inNamespace("window"), reduced);
        put("sliding-aggregate", maxParallelism, LATENESS, StateSpec.keyed("window-contents", "aggregating", "Tuple2<Long,Long>")
                .withFunction("count-sum").inNamespace("window"), aggregated);
        put("tumbling-process", maxParallelism, 0, StateSpec.keyed("window-contents", "list", "pojo:org.pyref.flink.Event")
                .inNamespace("window"), listed);
        put("count-reduce", maxParallelism, -1, StateSpec.keyed("window-contents", "reducing", "Tuple2<String,Long>")
                .withFunction("sum-f1").inNamespace("global"), counted);
        put("count-reduce", maxParallelism, -1, StateSpec.keyed("count", "reducing", "Long").withFunction("sum")
                .inNamespace("global"), counts);
    }

    /** The window of size ``size`` (slide ``slide``) that starts last before ``ts``: TimeWindow.getWindowStartWithOffset. */
    private static TimeWindow window(long ts, long size, long slide) {
        long start = TimeWindow.getWindowStartWithOffset(ts, 0, slide);
        return new TimeWindow(start, start + size);
    }

    /**
     * One window state of a window operator at parallelism 1 and, for time windows (lateness >= 0),
     * its timers: the trigger's at the window's max timestamp, the cleanup timer after the lateness.
     */
    private static void put(String uid, int maxParallelism, long lateness, StateSpec spec,
                            Map<Tuple2<Object, Object>, Object> contents) {
        List<Tuple3<Object, TimeWindow, Long>> timers = new ArrayList<>();
        for (Tuple2<Object, Object> c : contents.keySet()) {
            if (lateness >= 0) {
                TimeWindow w = (TimeWindow) c.f1;
                timers.add(Tuple3.of(c.f0, w, w.maxTimestamp()));
                if (lateness > 0) {
                    timers.add(Tuple3.of(c.f0, w, w.maxTimestamp() + lateness));
                }
            }
        }
        put(uid, maxParallelism, spec, contents, timers, "window-timers");
    }

    /**
     * One keyed state of a window operator at parallelism 1 ((key, namespace) -> value) and the
     * event-time timers (key, window, timestamp) of its timer service {@code service}.
     */
    static void put(String uid, int maxParallelism, StateSpec spec, Map<Tuple2<Object, Object>, Object> contents,
                    List<Tuple3<Object, TimeWindow, Long>> timers, String service) {
        ObjectNode part = Truth.part(uid, 0);
        ObjectNode state = spec.toJson();
        state.put("source", "input");
        ArrayNode entries = state.putArray("entries");
        for (Map.Entry<Tuple2<Object, Object>, Object> c : contents.entrySet()) {
            Object key = c.getKey().f0;
            ObjectNode e = entries.addObject();
            e.set("key", Json.value(key));
            e.set("namespace", Json.value(c.getKey().f1));
            e.put("key_group", KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism));
            e.put("subtask", 0);
            e.set("value", Json.value(c.getValue()));
        }
        ArrayNode timerArray = part.putArray("timers");
        for (Tuple3<Object, TimeWindow, Long> t : timers) {
            timerArray.add(StateDump.timer(service, "event_time", t.f0, t.f1, t.f2, maxParallelism, 0));
        }
        part.putObject("keyed_state").set(spec.name, state);
        if (spec.windowed()) {  // a window state's operator has the timer service (a merging window set's is void)
            part.putObject("timer_services").putObject(service).put("namespace", spec.namespace);
        }
        Truth.put(Truth.FROM_INPUT, part);
    }
}
