package org.pyref.flink;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * State that keeps changing over several checkpoints, so that a RocksDB incremental checkpoint holds
 * SST files of several checkpoints: "churn" (parallelism 2, String keys "k0".."k39") keeps ValueState
 * "latest", ListState "log" and MapState "seen". Each key's first element sets all three; then, once
 * a subtask holds all its keys, each of its next {@link #ROUNDS} snapshots first overwrites or clears
 * "latest", appends to "log" (cleared now and then), and puts and removes entries of "seen" for every
 * key; after the last round the operator reports done.
 */
final class ChurnJob {
    static final int KEYS = 40;
    static final int PARALLELISM = 2;
    static final int ROUNDS = 5;

    private ChurnJob() {}

    static void build(JobBuilder b) {
        DataStream<Event> events = b.source("churn-source", 1, split -> {
            List<Event> out = new ArrayList<>();
            for (int i = 0; i < KEYS; i++) {
                out.add(new Event("k" + i, i, i));
            }
            return out;
        });
        OperatorSpec churn = new OperatorSpec("churn", "String").state(StateSpec.keyed("latest", "value", "Long"))
                .state(StateSpec.keyed("log", "list", "Long")).state(StateSpec.map("seen", "String", "Long"));
        b.selfReporting(events.keyBy(e -> e.key, Types.<String>of("String")), churn, new Churn(), PARALLELISM);
    }

    static final class Churn implements Behaviour {
        /** This subtask's keys and their numbers. */
        private transient Map<String, Long> keys;
        private transient int rounds;

        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Event e = (Event) element;
            if (keys == null) {
                keys = new TreeMap<>();
            }
            keys.put(e.key, e.num);
            ValueState<Long> latest = op.state("latest");
            ListState<Long> log = op.state("log");
            MapState<String, Long> seen = op.state("seen");
            latest.update(e.num);
            log.add(e.num);
            seen.put("r0", e.num);
        }

        @Override
        public void beforeSnapshot(SpecOperator<?> op, long checkpointId) throws Exception {
            if (keys == null || keys.size() < ownKeys(op) || rounds >= ROUNDS) {
                return;
            }
            int r = ++rounds;
            ValueState<Long> latest = op.state("latest");
            ListState<Long> log = op.state("log");
            MapState<String, Long> seen = op.state("seen");
            for (Map.Entry<String, Long> k : keys.entrySet()) {
                long i = k.getValue();
                op.setCurrentKey(k.getKey());
                if (i % 5 == r % 5) {
                    latest.clear();
                } else {
                    latest.update(i * 10 + r);
                }
                if ((i + r) % 7 == 0) {
                    log.clear();
                } else {
                    log.add(100L * r + i);
                }
                seen.put("r" + r, (long) r);
                if (r >= 2 && i % 2 == 0) {
                    seen.remove("r" + (r - 2));
                }
            }
            if (rounds == ROUNDS) {
                op.reportDone();
            }
        }

        /** How many of the keys land on this subtask. */
        private static int ownKeys(SpecOperator<?> op) {
            int maxParallelism = op.taskInfo().getMaxNumberOfParallelSubtasks(), n = 0;
            for (int i = 0; i < KEYS; i++) {
                if (KeyGroupRangeAssignment.assignKeyToParallelOperator("k" + i, maxParallelism, PARALLELISM) == op.subtask()) {
                    n++;
                }
            }
            return n;
        }
    }
}
