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
 *
 * <p>"churn-rescaled-N" is its second phase: restored from a retained checkpoint of "churn" at
 * parallelism N, the same operator gets keys "k20".."k59" (half of them new; "k0".."k19" keep only what
 * was restored) and churns them once, so that its checkpoint right after that still holds the files the
 * restore built the rescaled RocksDB instance of (other subtasks' key groups, the range deletions that
 * clip them), before RocksDB's compactions (triggered by four level-0 files) drop them.
 */
final class ChurnJob {
    static final int KEYS = 40;
    static final int PARALLELISM = 2;
    static final int ROUNDS = 5;
    /** The keys of the phase after a rescale: "k20".."k59". */
    static final int RESCALED_FIRST = 20, RESCALED_KEYS = 60;

    private ChurnJob() {}

    static void build(JobBuilder b) {
        build(b, "churn-source", 0, KEYS, PARALLELISM, ROUNDS);
    }

    /** The phase after a rescale to ``parallelism`` (restored from a checkpoint of {@link #build(JobBuilder)}). */
    static void buildRescaled(JobBuilder b, int parallelism) {
        // A new source uid: the first phase's source state (its finished split) is not restored.
        build(b, "churn-rescaled-source", RESCALED_FIRST, RESCALED_KEYS, parallelism, 1);
    }

    private static void build(JobBuilder b, String source, int first, int end, int parallelism, int rounds) {
        DataStream<Event> events = b.source(source, 1, split -> {
            List<Event> out = new ArrayList<>();
            for (int i = first; i < end; i++) {
                out.add(new Event("k" + i, i, i));
            }
            return out;
        });
        OperatorSpec churn = new OperatorSpec("churn", "String").state(StateSpec.keyed("latest", "value", "Long"))
                .state(StateSpec.keyed("log", "list", "Long")).state(StateSpec.map("seen", "String", "Long"));
        b.selfReporting(events.keyBy(e -> e.key, Types.<String>of("String")), churn, new Churn(first, end, parallelism, rounds),
                parallelism);
    }

    static final class Churn implements Behaviour {
        private final int first, end, parallelism, lastRound;
        /** This subtask's keys and their numbers. */
        private transient Map<String, Long> keys;
        private transient int rounds;

        Churn(int first, int end, int parallelism, int lastRound) {
            this.first = first;
            this.end = end;
            this.parallelism = parallelism;
            this.lastRound = lastRound;
        }

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
            if (keys == null || keys.size() < ownKeys(op) || rounds >= lastRound) {
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
            if (rounds == lastRound) {
                op.reportDone();
            }
        }

        /** How many of the keys land on this subtask. */
        private int ownKeys(SpecOperator<?> op) {
            int maxParallelism = op.taskInfo().getMaxNumberOfParallelSubtasks(), n = 0;
            for (int i = first; i < end; i++) {
                if (KeyGroupRangeAssignment.assignKeyToParallelOperator("k" + i, maxParallelism, parallelism) == op.subtask()) {
                    n++;
                }
            }
            return n;
        }
    }
}
