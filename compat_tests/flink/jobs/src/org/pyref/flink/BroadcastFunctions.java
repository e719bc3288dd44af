package org.pyref.flink;

import java.io.Serializable;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedBroadcastProcessFunction;
import org.apache.flink.util.Collector;

/**
 * The broadcast-stream side of the operator-state job: each function keeps the rules it is sent
 * in Flink's broadcast state and writes that state to the truth when its operator snapshots.
 */
final class BroadcastFunctions {
    private BroadcastFunctions() {}

    static final StateSpec RULES = StateSpec.broadcast("rules", "String", "Long");
    static final StateSpec THRESHOLDS = StateSpec.broadcast("thresholds", "Integer", "String");

    static <K, V> MapStateDescriptor<K, V> descriptor(StateSpec spec) {
        return new MapStateDescriptor<>(spec.name, Types.<K>of(spec.keyType), Types.<V>of(spec.type));
    }

    /** A function's broadcast state: registered in initializeState, written to the truth in snapshotState. */
    private static final class Held<K, V> implements Serializable {
        private final String uid;
        private final StateSpec spec;
        private transient MapStateDescriptor<K, V> descriptor;
        private transient BroadcastState<K, V> state;

        Held(String uid, StateSpec spec) {
            this.uid = uid;
            this.spec = spec;
        }

        void initialize(FunctionInitializationContext context) throws Exception {
            descriptor = descriptor(spec);
            state = context.getOperatorStateStore().getBroadcastState(descriptor);
        }

        void snapshot(FunctionSnapshotContext context, RuntimeContext runtime) throws Exception {
            ObjectNode part = Truth.part(uid, Compat.subtask(runtime));
            part.putObject("operator_state").set(spec.name, StateDump.operatorState(spec, state, descriptor));
            Truth.put(context.getCheckpointId(), part);
        }
    }

    /** Non-keyed: rule name -> value. */
    static final class Rules extends BroadcastProcessFunction<Event, Event, Event> implements CheckpointedFunction {
        private final Held<String, Long> held;

        Rules(String uid) {
            held = new Held<>(uid, RULES);
        }

        @Override
        public void processElement(Event e, ReadOnlyContext ctx, Collector<Event> out) {
            out.collect(e);
        }

        @Override
        public void processBroadcastElement(Event e, Context ctx, Collector<Event> out) throws Exception {
            ctx.getBroadcastState(held.descriptor).put(e.key, e.num);
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            held.initialize(context);
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            held.snapshot(context, getRuntimeContext());
        }
    }

    /** Keyed (the operator has a keyed backend): rule number -> rule name. */
    static final class Thresholds extends KeyedBroadcastProcessFunction<String, Event, Event, Event>
            implements CheckpointedFunction {
        private final Held<Integer, String> held;

        Thresholds(String uid) {
            held = new Held<>(uid, THRESHOLDS);
        }

        @Override
        public void processElement(Event e, ReadOnlyContext ctx, Collector<Event> out) {
            out.collect(e);
        }

        @Override
        public void processBroadcastElement(Event e, Context ctx, Collector<Event> out) throws Exception {
            ctx.getBroadcastState(held.descriptor).put((int) e.num, e.key);
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            held.initialize(context);
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            held.snapshot(context, getRuntimeContext());
        }
    }
}
