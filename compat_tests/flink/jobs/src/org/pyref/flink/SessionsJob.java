package org.pyref.flink;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.streaming.runtime.operators.windowing.MergingWindowSet;
import org.apache.flink.util.Collector;

/**
 * Event-time session windows at parallelism 1 whose sessions merge: each sensor's readings open
 * sessions that a later reading bridges, so the window operator merges their state namespaces
 * (MERGE_NS in a changelog) of window contents kept as a list (a process function), reduced and
 * aggregated. Every reading is after the final watermark: no session has fired. The truth runs
 * Flink's own {@link MergingWindowSet} over the readings, which picks the state window a merge keeps
 * and the order it merges the others in, and merges the contents as the heap backend does.
 */
final class SessionsJob {
    static final long GAP = 10_000;
    /** Reading times in seconds after the final watermark: sessions opened, then bridged (9 joins 0 and 18). */
    static final long[] OFFSETS = {0, 18, 9, 40, 55, 48, 27, 36, 100};
    static final int SENSORS = 6;

    private SessionsJob() {}

    @SuppressWarnings("unchecked")
    static void build(JobBuilder b) {
        DataStream<Event> readings = b.source("readings-source", 1, SessionsJob::readings);
        SingleOutputStreamOperator<Long> process = readings.keyBy(e -> e.key, Types.<String>of("String"))
                .window(Compat.sessions(GAP))
                .process(new CountSession()).uid("session-process").name("session-process")
                .setParallelism(1);
        b.declare("session-process", 1, "String");
        b.probe(process, "session-process-probe");

        SingleOutputStreamOperator<Event> reduce = readings.keyBy(e -> e.key, Types.<String>of("String"))
                .window(Compat.sessions(GAP))
                .reduce(SessionsJob::sumNum).uid("session-reduce").name("session-reduce").setParallelism(1);
        b.declare("session-reduce", 1, "String");
        b.probe(reduce, "session-reduce-probe");

        SingleOutputStreamOperator<Tuple2<Long, Long>> aggregate = readings.keyBy(e -> e.key, Types.<String>of("String"))
                .window(Compat.sessions(GAP))
                .aggregate(new WindowsJob.CountSum()).uid("session-aggregate").name("session-aggregate")
                .setParallelism(1);
        b.declare("session-aggregate", 1, "String");
        b.probe(aggregate, "session-aggregate-probe");

        truth(readings(0), b.maxParallelism);
    }

    /** Sensor s sends the first 3 + s of OFFSETS (each sensor shifted by s ms). */
    static List<Event> readings(int split) {
        List<Event> out = new ArrayList<>();
        long seq = 0;
        for (int s = 0; s < SENSORS; s++) {
            for (int j = 0; j < 3 + s; j++) {
                Event e = new Event(String.format("sensor-%02d", s), s * 100L + j,
                        JobBuilder.END_WATERMARK + 1 + s + OFFSETS[j] * 1000L);
                e.seq = seq++;
                out.add(e);
            }
        }
        return out;
    }

    static Event sumNum(Event a, Event b) {
        Event e = new Event(a.key, a.num + b.num, Math.max(a.ts, b.ts));
        e.seq = Math.max(a.seq, b.seq);
        return e;
    }

    /** Contents by (key, state window), merged as AbstractHeapMergingState.mergeNamespaces merges them. */
    private static final class Merged {
        final Map<Tuple2<Object, Object>, Object> contents = new LinkedHashMap<>();
        final ReduceFunction<Object> merge;

        Merged(ReduceFunction<Object> merge) {
            this.merge = merge;
        }

        void merge(String key, TimeWindow target, Collection<TimeWindow> sources) throws Exception {
            Object merged = null;
            for (TimeWindow source : sources) {
                Object v = contents.remove(Tuple2.of(key, source));
                merged = merged == null ? v : v == null ? merged : merge.reduce(merged, v);
            }
            if (merged != null) {
                contents.merge(Tuple2.of(key, target), merged, (a, x) -> {
                    try {
                        return merge.reduce(a, x);
                    } catch (Exception ex) {
                        throw new IllegalStateException(ex);
                    }
                });
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static void truth(List<Event> readings, int maxParallelism) {
        WindowsJob.CountSum countSum = new WindowsJob.CountSum();
        Merged listed = new Merged((a, x) -> {
            List<Event> l = new ArrayList<>((List<Event>) a);
            l.addAll((List<Event>) x);
            return l;
        });
        Merged reduced = new Merged((a, x) -> sumNum((Event) a, (Event) x));
        Merged aggregated = new Merged((a, x) -> countSum.merge((Tuple2<Long, Long>) a, (Tuple2<Long, Long>) x));
        Map<String, List<Tuple2<TimeWindow, TimeWindow>>> sets = new LinkedHashMap<>();
        EventTimeSessionWindows sessions = Compat.sessions(GAP);
        try {
            for (Event e : readings) {
                InMemoryList<Tuple2<TimeWindow, TimeWindow>> set =
                        new InMemoryList<>(sets.computeIfAbsent(e.key, k -> new ArrayList<>()));
                MergingWindowSet<TimeWindow> windows = new MergingWindowSet<>(sessions, set);
                TimeWindow actual = windows.addWindow(new TimeWindow(e.ts, e.ts + GAP),
                        (result, mergedWindows, stateResult, mergedStateWindows) -> {
                            for (Merged m : new Merged[] {listed, reduced, aggregated}) {
                                m.merge(e.key, stateResult, mergedStateWindows);
                            }
                        });
                Tuple2<Object, Object> scope = Tuple2.of(e.key, windows.getStateWindow(actual));
                ((List<Event>) listed.contents.computeIfAbsent(scope, k -> new ArrayList<Event>())).add(e);
                reduced.contents.merge(scope, e, (a, x) -> sumNum((Event) a, e));
                aggregated.contents.put(scope, countSum.add(e, (Tuple2<Long, Long>) aggregated.contents
                        .getOrDefault(scope, countSum.createAccumulator())));
                windows.persist();
                sets.put(e.key, set.list);
            }
        } catch (Exception ex) {
            throw new IllegalStateException(ex);
        }
        // The trigger's and the cleanup timer (no lateness: one) of every session, in the session's namespace.
        List<Tuple3<Object, TimeWindow, Long>> timers = new ArrayList<>();
        Map<Tuple2<Object, Object>, Object> setState = new LinkedHashMap<>();
        for (Map.Entry<String, List<Tuple2<TimeWindow, TimeWindow>>> s : sets.entrySet()) {
            for (Tuple2<TimeWindow, TimeWindow> w : s.getValue()) {
                timers.add(Tuple3.of(s.getKey(), w.f0, w.f0.maxTimestamp()));
            }
            setState.put(Tuple2.of(s.getKey(), VoidNamespace.INSTANCE), s.getValue());
        }
        StateSpec mergingSet = StateSpec.keyed("merging-window-set", "list", "Tuple2<TimeWindow,TimeWindow>");
        for (Object[] op : new Object[][] {{"session-process", listed, "list", "pojo:org.pyref.flink.Event", null},
                {"session-reduce", reduced, "reducing", "pojo:org.pyref.flink.Event", null},
                {"session-aggregate", aggregated, "aggregating", "Tuple2<Long,Long>", "count-sum"}}) {
            StateSpec contents = StateSpec.keyed("window-contents", (String) op[2], (String) op[3]).inNamespace("window");
            if (op[4] != null) {
                contents = contents.withFunction((String) op[4]);
            }
            WindowsJob.put((String) op[0], maxParallelism, contents, ((Merged) op[1]).contents, timers, "window-timers");
            WindowsJob.put((String) op[0], maxParallelism, mergingSet, setState, List.of(), "window-timers");
        }
    }

    static final class CountSession extends ProcessWindowFunction<Event, Long, String, TimeWindow> {
        @Override
        public void process(String key, Context ctx, Iterable<Event> events, Collector<Long> out) {
            long n = 0;
            for (Event ignored : events) {
                n++;
            }
            out.collect(n);
        }
    }

    /** A ListState over a list, for running MergingWindowSet outside an operator. */
    private static final class InMemoryList<T> implements ListState<T> {
        List<T> list;

        InMemoryList(List<T> list) {
            this.list = new ArrayList<>(list);
        }

        @Override
        public Iterable<T> get() {
            return list;
        }

        @Override
        public void add(T value) {
            list.add(value);
        }

        @Override
        public void update(List<T> values) {
            list = new ArrayList<>(values);
        }

        @Override
        public void addAll(List<T> values) {
            list.addAll(values);
        }

        @Override
        public void clear() {
            list = new ArrayList<>();
        }
    }
}
