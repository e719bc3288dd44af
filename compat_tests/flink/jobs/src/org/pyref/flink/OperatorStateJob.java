package org.pyref.flink;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.core.io.SimpleVersionedSerialization;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;

/**
 * Operator state at parallelism 3: SPLIT_DISTRIBUTE and UNION list state, an operator's own
 * broadcast state, broadcast state fed by a broadcast stream (non-keyed and keyed functions),
 * and the coordinator state of two FLIP-27 sources: the corpus's own and NumberSequenceSource.
 */
final class OperatorStateJob {
    static final int PARALLELISM = 3;
    /** NumberSequenceSource's range: never reached (the probe throttles it to 50 numbers a second). */
    static final long SEQUENCE_END = 1_000_000_000_000L;

    private OperatorStateJob() {}

    static void build(JobBuilder b) {
        DataStream<Event> events = b.source("events-source", PARALLELISM, OperatorStateJob::items);
        OperatorSpec lists = new OperatorSpec("list-states", null)
                .state(StateSpec.split("names", "String"))
                .state(StateSpec.union("union-offsets", "Long"))
                .state(StateSpec.split("blobs", "kryo:org.pyref.flink.LegacyBlob"))
                .state(StateSpec.union("union-pairs", "Tuple2<String,Long>"))
                .state(StateSpec.broadcast("op-broadcast", "String", "Integer"));
        DataStream<Event> main = b.operator(events, lists, new Lists(), PARALLELISM);

        DataStream<Event> rules = b.source("rules-source", 1, OperatorStateJob::rules);
        SingleOutputStreamOperator<Event> ruled = main.connect(rules.broadcast(BroadcastFunctions.descriptor(BroadcastFunctions.RULES)))
                .process(new BroadcastFunctions.Rules("broadcast-rules")).uid("broadcast-rules").name("broadcast-rules")
                .setParallelism(PARALLELISM);
        b.declare("broadcast-rules", PARALLELISM, null);
        b.probe(ruled, "broadcast-rules-probe");
        SingleOutputStreamOperator<Event> thresholds = main.keyBy(e -> e.key, Types.<String>of("String"))
                .connect(rules.broadcast(BroadcastFunctions.descriptor(BroadcastFunctions.THRESHOLDS)))
                .process(new BroadcastFunctions.Thresholds("keyed-broadcast")).uid("keyed-broadcast").name("keyed-broadcast")
                .setParallelism(PARALLELISM);
        b.declare("keyed-broadcast", PARALLELISM, "String");
        b.probe(thresholds, "keyed-broadcast-probe");

        DataStream<Long> sequence = b.env.fromSource(new NumberSequenceSource(0, SEQUENCE_END), WatermarkStrategy.noWatermarks(),
                "sequence-source").uid("sequence-source").setParallelism(1);
        b.declare("sequence-source", 1, null);
        b.selfReporting(sequence, new OperatorSpec("sequence-probe", null), new SequenceProbe(), 1);
    }

    /** Ten items per split: "item-00".."item-29". */
    static List<Event> items(int split) {
        List<Event> out = new ArrayList<>();
        for (int k = 0; k < 10; k++) {
            int i = split * 10 + k;
            Event e = new Event(String.format("item-%02d", i), i, JobBuilder.END_WATERMARK + 1 + i);
            e.seq = i;
            out.add(e);
        }
        return out;
    }

    /** Six rules, all on the one split of the rules source. */
    static List<Event> rules(int split) {
        List<Event> out = new ArrayList<>();
        for (String name : Arrays.asList("rule-a", "rule-b", "rule-c", "rule-d", "rule-e", "rule-f")) {
            out.add(new Event(name, 10L * (name.charAt(5) - 'a' + 1), JobBuilder.END_WATERMARK + 1));
        }
        return out;
    }

    static final class Lists implements Behaviour {
        private transient long count;
        private transient long maxNum;

        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Event e = (Event) element;
            count++;
            maxNum = Math.max(maxNum, e.num);
            op.<ListState<String>>state("names").add(e.key);
            if (e.num % 3 == 0) {
                op.<ListState<LegacyBlob>>state("blobs").add(new LegacyBlob(e.key, new long[] {e.num}));
            }
            if (e.num % 2 == 0) {
                op.<ListState<Tuple2<String, Long>>>state("union-pairs").add(Tuple2.of(e.key, e.num));
            }
            BroadcastState<String, Integer> config = op.state("op-broadcast");
            config.put("parallelism", PARALLELISM);
            config.put("version", 1);
        }

        @Override
        public void beforeSnapshot(SpecOperator<?> op, long checkpointId) throws Exception {
            op.<ListState<Long>>state("union-offsets").update(Arrays.asList(op.subtask() * 1000L + count, maxNum));
        }
    }

    /**
     * Chained to NumberSequenceSource (one split, whose id is "1": the source numbers splits from 1): throttles it and, at the snapshot, writes
     * the source's reader state and enumerator checkpoint as the source writes them: the split
     * from the next number on, and no splits left to assign.
     */
    static final class SequenceProbe implements Behaviour {
        private transient Long last;
        private transient int seen;

        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Thread.sleep(20);
            last = (Long) element;
            if (++seen >= 5) {
                op.reportDone();
            }
        }

        @Override
        public void beforeSnapshot(SpecOperator<?> op, long checkpointId) throws Exception {
            NumberSequenceSource source = new NumberSequenceSource(0, SEQUENCE_END);
            long from = last == null ? 0 : last + 1;
            NumberSequenceSource.NumberSequenceSplit split = new NumberSequenceSource.NumberSequenceSplit("1", from, SEQUENCE_END);
            ObjectNode state = StateSpec.split("SourceReaderState", "byte[]").toJson();
            state.putArray("elements").add(Json.hex(SimpleVersionedSerialization.writeVersionAndSerialize(source.getSplitSerializer(), split)));
            ObjectNode decoded = state.putArray("decoded").addObject();
            decoded.put("split_id", "1");
            decoded.set("from", Json.integer(from));
            decoded.set("to", Json.integer(SEQUENCE_END));
            ObjectNode part = Truth.part("sequence-source", 0);
            part.putObject("operator_state").set("SourceReaderState", state);
            SimpleVersionedSerializer<java.util.Collection<NumberSequenceSource.NumberSequenceSplit>> enumerator =
                    source.getEnumeratorCheckpointSerializer();
            ObjectNode c = part.putObject("coordinator");
            c.put("source", NumberSequenceSource.class.getName());
            c.put("enumerator_serializer_version", enumerator.getVersion());
            c.put("enumerator_checkpoint", Json.hex(enumerator.serialize(new ArrayList<>())));
            c.putObject("decoded").putArray("remaining_splits");
            Truth.put(checkpointId, part);
        }
    }
}
