package org.pyref.flink;

import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
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

    @SuppressWarnings("unchecked")
    static <K, V> MapStateDescriptor<K, V> descriptor(StateSpec spec) {
        return new MapStateDescriptor<>(spec.name, (TypeInformation<K>) Types.parse(spec.keyType),
                (TypeInformation<V>) Types.parse(spec.type));
    }

    private static void dump(String uid, int subtask, StateSpec spec, BroadcastState<?, ?> state,
                             MapStateDescriptor<?, ?> descriptor, long checkpointId) throws Exception {
        ObjectNode part = Truth.part(uid, subtask);
        part.putObject("operator_state").set(spec.name, StateDump.operatorState(spec, state, descriptor));
        Truth.put(checkpointId, part);
    }

    /** Non-keyed: rule name -> value. */
    static final class Rules extends BroadcastProcessFunction<Event, Event, Event> implements CheckpointedFunction {
        private final String uid;
        private transient MapStateDescriptor<String, Long> descriptor;
        private transient BroadcastState<String, Long> state;

        Rules(String uid) {
            this.uid = uid;
        }

        @Override
        public void processElement(Event e, ReadOnlyContext ctx, Collector<Event> out) {
            out.collect(e);
        }

        @Override
        public void processBroadcastElement(Event e, Context ctx, Collector<Event> out) throws Exception {
            ctx.getBroadcastState(descriptor).put(e.key, e.num);
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            descriptor = descriptor(RULES);
            state = context.getOperatorStateStore().getBroadcastState(descriptor);
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            dump(uid, Compat.subtask(getRuntimeContext()), RULES, state, descriptor, context.getCheckpointId());
        }
    }

    /** Keyed (the operator has a keyed backend): rule number -> rule name. */
    static final class Thresholds extends KeyedBroadcastProcessFunction<String, Event, Event, Event>
            implements CheckpointedFunction {
        private final String uid;
        private transient MapStateDescriptor<Integer, String> descriptor;
        private transient BroadcastState<Integer, String> state;

        Thresholds(String uid) {
            this.uid = uid;
        }

        @Override
        public void processElement(Event e, ReadOnlyContext ctx, Collector<Event> out) {
            out.collect(e);
        }

        @Override
        public void processBroadcastElement(Event e, Context ctx, Collector<Event> out) throws Exception {
            ctx.getBroadcastState(descriptor).put((int) e.num, e.key);
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            descriptor = descriptor(THRESHOLDS);
            state = context.getOperatorStateStore().getBroadcastState(descriptor);
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            dump(uid, Compat.subtask(getRuntimeContext()), THRESHOLDS, state, descriptor, context.getCheckpointId());
        }
    }
}
