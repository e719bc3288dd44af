package org.pyref.flink;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerialization;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * A FLIP-27 source that emits a fixed list of events per split (split i goes to subtask i),
 * then one end marker whose timestamp becomes the final watermark, then idles without
 * finishing, so a savepoint sees frozen state. Bounded, it finishes instead (restore jobs).
 *
 * Its reader state (operator list state "SourceReaderState") and its enumerator's checkpoint
 * (operator coordinator state) are written to the truth when they are snapshotted.
 */
public class FixedSource implements Source<Event, FixedSource.Split, FixedSource.EnumState>, ResultTypeQueryable<Event> {
    private static final long serialVersionUID = 1L;

    /** The events of split i (without the end marker). */
    interface Generator extends Serializable {
        List<Event> records(int split);
    }

    private final String uid;
    private final int splits;
    private final Generator generator;
    private final long endWatermark;
    private final boolean bounded;

    /** A corpus job's source: emits every split's records, then an end marker at endWatermark, then idles. */
    static FixedSource idling(String uid, int splits, Generator generator, long endWatermark) {
        return new FixedSource(uid, splits, generator, endWatermark, false);
    }

    /** A restore job's source: no records; finishes at once (its end of input fires every event-time timer). */
    static FixedSource empty(String uid, int splits) {
        return new FixedSource(uid, splits, i -> Collections.emptyList(), Long.MIN_VALUE, true);
    }

    private FixedSource(String uid, int splits, Generator generator, long endWatermark, boolean bounded) {
        this.uid = uid;
        this.splits = splits;
        this.generator = generator;
        this.endWatermark = endWatermark;
        this.bounded = bounded;
    }

    /** Event timestamps from the events; the end marker's timestamp as the one watermark. */
    static WatermarkStrategy<Event> watermarks() {
        return WatermarkStrategy.<Event>forGenerator(ctx -> new EndMarkerWatermarks()).withTimestampAssigner((e, t) -> e.ts);
    }

    private static final class EndMarkerWatermarks implements WatermarkGenerator<Event> {
        @Override
        public void onEvent(Event e, long timestamp, WatermarkOutput output) {
            if (e.end) {
                output.emitWatermark(new Watermark(e.ts));
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {}
    }

    @Override
    public Boundedness getBoundedness() {
        return bounded ? Boundedness.BOUNDED : Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public TypeInformation<Event> getProducedType() {
        return TypeInformation.of(Event.class);
    }

    @Override
    public SourceReader<Event, Split> createReader(SourceReaderContext context) {
        return new Reader(context.getIndexOfSubtask());
    }

    @Override
    public SplitEnumerator<Split, EnumState> createEnumerator(SplitEnumeratorContext<Split> context) {
        List<Integer> all = new ArrayList<>();
        for (int i = 0; i < splits; i++) {
            all.add(i);
        }
        return new Enumerator(context, new EnumState(splits, all));
    }

    @Override
    public SplitEnumerator<Split, EnumState> restoreEnumerator(SplitEnumeratorContext<Split> context, EnumState state) {
        return new Enumerator(context, state);
    }

    @Override
    public SimpleVersionedSerializer<Split> getSplitSerializer() {
        return new SplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<EnumState> getEnumeratorCheckpointSerializer() {
        return new EnumStateSerializer();
    }

    /** Split i: the position of the next record to emit (the end marker counts as the last record). */
    public static final class Split implements SourceSplit {
        final int index;
        long position;

        Split(int index, long position) {
            this.index = index;
            this.position = position;
        }

        @Override
        public String splitId() {
            return "split-" + index;
        }

        ObjectNode json() {
            ObjectNode o = Json.object();
            o.put("split", index);
            o.set("position", Json.integer(position));
            return o;
        }
    }

    /** The enumerator's checkpoint: the split count and the splits not yet assigned. */
    public static final class EnumState {
        final int splits;
        final List<Integer> unassigned;

        EnumState(int splits, List<Integer> unassigned) {
            this.splits = splits;
            this.unassigned = unassigned;
        }
    }

    static final class SplitSerializer implements SimpleVersionedSerializer<Split> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Split split) throws IOException {
            DataOutputSerializer out = new DataOutputSerializer(12);
            out.writeInt(split.index);
            out.writeLong(split.position);
            return out.getCopyOfBuffer();
        }

        @Override
        public Split deserialize(int version, byte[] bytes) throws IOException {
            DataInputDeserializer in = new DataInputDeserializer(bytes);
            return new Split(in.readInt(), in.readLong());
        }
    }

    static final class EnumStateSerializer implements SimpleVersionedSerializer<EnumState> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(EnumState state) throws IOException {
            DataOutputSerializer out = new DataOutputSerializer(16);
            out.writeInt(state.splits);
            out.writeInt(state.unassigned.size());
            for (int i : state.unassigned) {
                out.writeInt(i);
            }
            return out.getCopyOfBuffer();
        }

        @Override
        public EnumState deserialize(int version, byte[] bytes) throws IOException {
            DataInputDeserializer in = new DataInputDeserializer(bytes);
            int splits = in.readInt(), n = in.readInt();
            List<Integer> unassigned = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                unassigned.add(in.readInt());
            }
            return new EnumState(splits, unassigned);
        }
    }

    private final class Enumerator implements SplitEnumerator<Split, EnumState> {
        private final SplitEnumeratorContext<Split> context;
        private final int splitCount;
        private final TreeSet<Integer> unassigned;

        Enumerator(SplitEnumeratorContext<Split> context, EnumState state) {
            this.context = context;
            this.splitCount = state.splits;
            this.unassigned = new TreeSet<>(state.unassigned);
        }

        @Override
        public void start() {}

        @Override
        public void handleSplitRequest(int subtaskId, String requesterHostname) {}

        @Override
        public void addSplitsBack(List<Split> returned, int subtaskId) {
            returned.forEach(s -> unassigned.add(s.index));
        }

        @Override
        public void addReader(int subtaskId) {
            if (unassigned.remove(subtaskId)) {
                context.assignSplit(new Split(subtaskId, 0), subtaskId);
            }
            if (bounded) {
                context.signalNoMoreSplits(subtaskId);
            }
        }

        @Override
        public EnumState snapshotState(long checkpointId) throws Exception {
            EnumState state = new EnumState(splitCount, new ArrayList<>(unassigned));
            ObjectNode c = Json.object();
            c.put("source", FixedSource.class.getName());
            EnumStateSerializer ser = new EnumStateSerializer();
            c.put("enumerator_serializer_version", ser.getVersion());
            c.put("enumerator_checkpoint", Json.hex(ser.serialize(state)));
            ObjectNode decoded = c.putObject("decoded");
            decoded.put("splits", splitCount);
            ArrayNode un = decoded.putArray("unassigned");
            state.unassigned.forEach(un::add);
            ObjectNode part = Truth.part(uid, 0);
            part.set("coordinator", c);
            Truth.put(checkpointId, part);
            return state;
        }

        @Override
        public void close() {}
    }

    private final class Reader implements SourceReader<Event, Split> {
        private final int subtask;
        private final ArrayDeque<Split> queued = new ArrayDeque<>();
        private final List<Split> exhausted = new ArrayList<>();
        private Split current;
        private List<Event> records;
        private boolean noMoreSplits;
        private CompletableFuture<Void> available = new CompletableFuture<>();

        Reader(int subtask) {
            this.subtask = subtask;
        }

        @Override
        public void start() {}

        @Override
        public InputStatus pollNext(ReaderOutput<Event> output) {
            while (true) {
                if (current != null && current.position < records.size()) {
                    output.collect(records.get((int) current.position++));
                    return InputStatus.MORE_AVAILABLE;
                }
                if (current != null) {
                    exhausted.add(current);
                    current = null;
                }
                current = queued.poll();
                if (current == null) {
                    break;
                }
                records = new ArrayList<>(generator.records(current.index));
                if (!bounded) {
                    records.add(Event.end(endWatermark));
                }
            }
            if (noMoreSplits && bounded) {
                return InputStatus.END_OF_INPUT;
            }
            if (available.isDone()) {
                available = new CompletableFuture<>();
            }
            return InputStatus.NOTHING_AVAILABLE;
        }

        @Override
        public CompletableFuture<Void> isAvailable() {
            return available;
        }

        @Override
        public void addSplits(List<Split> splits) {
            queued.addAll(splits);
            available.complete(null);
        }

        @Override
        public void notifyNoMoreSplits() {
            noMoreSplits = true;
            available.complete(null);
        }

        @Override
        public List<Split> snapshotState(long checkpointId) {
            List<Split> all = new ArrayList<>(exhausted);
            if (current != null) {
                all.add(current);
            }
            all.addAll(queued);
            List<Split> copies = new ArrayList<>();
            ObjectNode state = StateSpec.split("SourceReaderState", "byte[]").toJson();
            ArrayNode elements = state.putArray("elements"), decoded = state.putArray("decoded");
            for (Split s : all) {
                Split copy = new Split(s.index, s.position);
                copies.add(copy);
                elements.add(Json.hex(serialized(copy)));
                decoded.add(copy.json());
            }
            ObjectNode part = Truth.part(uid, subtask);
            part.putObject("operator_state").set("SourceReaderState", state);
            Truth.put(checkpointId, part);
            return copies;
        }

        @Override
        public void close() {}
    }

    private static byte[] serialized(Split split) {
        try {
            return SimpleVersionedSerialization.writeVersionAndSerialize(new SplitSerializer(), split);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
