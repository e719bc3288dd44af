package org.pyref.flink;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.TaskInfo;
import org.apache.flink.api.common.state.OperatorStateStore;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.internal.InternalKvState;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * An operator that registers exactly the states and timer services of its {@link OperatorSpec}
 * and writes what it holds as a truth part: at every snapshot when it runs in a corpus job (its
 * {@link Behaviour} updates the state), once after restore when it runs in a restore job (then
 * it also records every timer that fires).
 */
public class SpecOperator<T> extends FinishingOperator<T> implements OneInputStreamOperator<T, T> {
    private static final long serialVersionUID = 1L;

    private final OperatorSpec spec;
    private final Behaviour behaviour;
    private final String doneName;
    private final long doneWatermark;

    private transient Map<String, Object> states;
    private transient Map<String, StateDescriptor<?, ?>> descriptors;
    private transient Map<String, InternalTimerService<Object>> timerServices;
    private transient ArrayNode fired;
    private transient boolean reportedDone;

    /**
     * @param behaviour null in a restore job
     * @param doneName reported to {@link Truth#done} when a watermark of at least doneWatermark arrives (null: never)
     */
    SpecOperator(OperatorSpec spec, Behaviour behaviour, String doneName, long doneWatermark) {
        this.spec = spec;
        this.behaviour = behaviour;
        this.doneName = doneName;
        this.doneWatermark = doneWatermark;
    }

    private boolean restoring() {
        return behaviour == null;
    }

    TaskInfo taskInfo() {
        return getContainingTask().getEnvironment().getTaskInfo();
    }

    int subtask() {
        return taskInfo().getIndexOfThisSubtask();
    }

    @SuppressWarnings("unchecked")
    <S> S state(String name) {
        return (S) states.get(name);
    }

    InternalTimerService<Object> timers(String service) {
        return timerServices.get(service);
    }

    private static TypeSerializer<?> namespaceSerializer(String namespace) {
        switch (namespace) {
            case "void": return VoidNamespaceSerializer.INSTANCE;
            case "window": return new TimeWindow.Serializer();
            case "global": return new GlobalWindow.Serializer();
            default: throw new IllegalArgumentException("unknown namespace " + namespace + " (void, window or global)");
        }
    }

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        states = new LinkedHashMap<>();
        descriptors = new LinkedHashMap<>();
        OperatorStateStore store = context.getOperatorStateStore();
        for (StateSpec s : spec.states) {
            StateDescriptor<?, ?> d;
            Object state;
            if (s.keyed()) {
                d = s.descriptor();
                state = getOrCreateKeyedState((TypeSerializer) namespaceSerializer(s.namespace), (StateDescriptor) d);
                if ("void".equals(s.namespace)) {
                    ((InternalKvState) state).setCurrentNamespace(VoidNamespace.INSTANCE);
                }
            } else if ("BROADCAST".equals(s.mode)) {
                org.apache.flink.api.common.state.MapStateDescriptor<Object, Object> b = s.broadcastDescriptor();
                state = store.getBroadcastState(b);
                d = b;
            } else {
                d = s.listDescriptor();
                state = "UNION".equals(s.mode) ? store.getUnionListState((org.apache.flink.api.common.state.ListStateDescriptor) d)
                        : store.getListState((org.apache.flink.api.common.state.ListStateDescriptor) d);
            }
            states.put(s.name, state);
            descriptors.put(s.name, d);
        }
    }

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public void open() throws Exception {
        super.open();
        fired = Json.array();
        if (spec.keyed()) {
            Truth.keyedBackend(getKeyedStateBackend().getClass().getName());
        }
        timerServices = new LinkedHashMap<>();
        for (Map.Entry<String, String> t : spec.timerServices.entrySet()) {
            timerServices.put(t.getKey(), getInternalTimerService(t.getKey(), (TypeSerializer) namespaceSerializer(t.getValue()),
                    new Recorder(t.getKey())));
        }
        if (restoring()) {
            Truth.put(Truth.RESTORED, dump());
        }
    }

    @Override
    public void processElement(StreamRecord<T> element) throws Exception {
        if (behaviour != null) {
            behaviour.process(this, element.getValue());
        }
        output.collect(element);
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        super.processWatermark(mark);
        if (doneName != null && !reportedDone && mark.getTimestamp() >= doneWatermark) {
            reportedDone = true;
            Truth.done(doneName, subtask());
        }
    }

    /** Lets a behaviour report done on its own condition (a source that never sends a final watermark). */
    void reportDone() {
        if (doneName != null && !reportedDone) {
            reportedDone = true;
            Truth.done(doneName, subtask());
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        if (!restoring()) {
            behaviour.beforeSnapshot(this, context.getCheckpointId());
            Truth.put(context.getCheckpointId(), behaviour.dumpsState() ? dump() : Truth.part(spec.uid, subtask()));
        }
    }

    @Override
    void finished() {
        if (restoring()) {
            ObjectNode part = Truth.part(spec.uid, subtask());
            part.set("fired_timers", fired);
            Truth.put(Truth.RESTORED, part);
        }
    }

    /** Everything this subtask holds: operator state, keyed state by key and namespace, pending timers. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    ObjectNode dump() throws Exception {
        TaskInfo info = taskInfo();
        int subtask = info.getIndexOfThisSubtask(), maxParallelism = info.getMaxNumberOfParallelSubtasks();
        ObjectNode part = Truth.part(spec.uid, subtask);
        part.put("operator_id", getOperatorID().toHexString());
        part.put("parallelism", info.getNumberOfParallelSubtasks());
        part.put("max_parallelism", maxParallelism);
        ObjectNode operatorState = part.putObject("operator_state"), keyedState = part.putObject("keyed_state");
        Object savedKey = spec.keyed() ? getCurrentKey() : null;
        for (StateSpec s : spec.states) {
            if (s.keyed()) {
                keyedState.set(s.name, StateDump.keyedState((KeyedStateBackend) getKeyedStateBackend(), s, states.get(s.name),
                        descriptors.get(s.name), maxParallelism, subtask));
            } else {
                operatorState.set(s.name, StateDump.operatorState(s, states.get(s.name), descriptors.get(s.name)));
            }
        }
        ObjectNode services = part.putObject("timer_services");
        ArrayNode timers = part.putArray("timers");
        for (Map.Entry<String, InternalTimerService<Object>> t : timerServices.entrySet()) {
            services.putObject(t.getKey()).put("namespace", spec.timerServices.get(t.getKey()));
            List<ObjectNode> found = new ArrayList<>();
            t.getValue().forEachEventTimeTimer((ns, ts) -> found.add(
                    StateDump.timer(t.getKey(), "event_time", getCurrentKey(), ns, ts, maxParallelism, subtask)));
            t.getValue().forEachProcessingTimeTimer((ns, ts) -> found.add(
                    StateDump.timer(t.getKey(), "processing_time", getCurrentKey(), ns, ts, maxParallelism, subtask)));
            found.forEach(timers::add);
        }
        if (savedKey != null) {
            setCurrentKey(savedKey);
        }
        return part;
    }

    /** The timer service's callback: a restored job records what fires; a corpus job's timers never fire. */
    private final class Recorder implements Triggerable<Object, Object> {
        private final String service;

        Recorder(String service) {
            this.service = service;
        }

        @Override
        public void onEventTime(InternalTimer<Object, Object> timer) {
            record(timer, "event_time");
        }

        @Override
        public void onProcessingTime(InternalTimer<Object, Object> timer) {
            record(timer, "processing_time");
        }

        private void record(InternalTimer<Object, Object> timer, String domain) {
            TaskInfo info = taskInfo();
            fired.add(StateDump.timer(service, domain, timer.getKey(), timer.getNamespace(), timer.getTimestamp(),
                    info.getMaxNumberOfParallelSubtasks(), info.getIndexOfThisSubtask()));
        }
    }
}
