package org.pyref.flink.sources;

import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.connector.base.source.utils.SerdeUtils;
import org.apache.flink.connector.file.src.FileSourceSplit;
import org.apache.flink.connector.file.src.FileSourceSplitSerializer;
import org.apache.flink.connector.file.src.PendingSplitsCheckpoint;
import org.apache.flink.connector.file.src.PendingSplitsCheckpointSerializer;
import org.apache.flink.connector.file.src.util.CheckpointedPosition;
import org.apache.flink.connector.kafka.source.enumerator.AssignmentStatus;
import org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumState;
import org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumStateSerializer;
import org.apache.flink.connector.kafka.source.enumerator.SplitAndAssignmentStatus;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplitSerializer;
import org.apache.flink.core.fs.Path;
import org.apache.flink.core.io.SimpleVersionedSerialization;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.kafka.common.TopicPartition;

import java.lang.reflect.Method;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Writes pyref's FLIP-27 source vectors: splits as a SourceReader's list state holds them
 * (SimpleVersionedSerialization.writeVersionAndSerialize of the split serializer) and enumerator
 * checkpoints as the operator coordinator state holds them (SourceCoordinator.writeCheckpointBytes),
 * each beside the values that made it. Every byte comes from the sources' own serializers:
 * NumberSequenceSource (flink-dist), FileSource (flink-connector-files) and KafkaSource
 * (apache/flink-connector-kafka's classes, compiled unchanged beside this file). Run once by
 * generate.py; the output is committed and never regenerated.
 */
public final class SourceVectors {

    private static final StringBuilder SPLITS = new StringBuilder();
    private static final StringBuilder ENUMERATORS = new StringBuilder();

    public static void main(String[] args) throws Exception {
        numberSequence();
        kafka();
        files();
        String json = "{\"schema\": \"pyref-source-vectors/1\",\n\"splits\": [\n" + SPLITS
                + "\n],\n\"enumerators\": [\n" + ENUMERATORS + "\n]}\n";
        Files.write(Paths.get(args[0]), json.getBytes(StandardCharsets.UTF_8));
    }

    // -- NumberSequenceSource -------------------------------------------------------------

    private static void numberSequence() throws Exception {
        NumberSequenceSource source = new NumberSequenceSource(0, 99);
        SimpleVersionedSerializer<NumberSequenceSplit> splits = source.getSplitSerializer();
        NumberSequenceSplit first = new NumberSequenceSplit("0", 0, 49);
        NumberSequenceSplit last = new NumberSequenceSplit("12", 50, 99);
        NumberSequenceSplit extremes = new NumberSequenceSplit("κ-7", Long.MIN_VALUE, Long.MAX_VALUE);
        for (NumberSequenceSplit s : Arrays.asList(first, last, extremes)) {
            split("number-sequence", s.splitId(), sequence(s), splits, s);
        }
        SimpleVersionedSerializer<Collection<NumberSequenceSplit>> checkpoints =
                source.getEnumeratorCheckpointSerializer();
        enumerator("number-sequence", "two remaining", checkpoints.getVersion(),
                checkpoints.serialize(Arrays.asList(first, last)),
                "[" + pending(sequence(first)) + ", " + pending(sequence(last)) + "]", "");
        enumerator("number-sequence", "none remaining", checkpoints.getVersion(),
                checkpoints.serialize(new ArrayList<>()), "[]", "");
    }

    private static String sequence(NumberSequenceSplit s) {
        return "{\"split_id\": " + str(s.splitId()) + ", \"start\": " + s.from() + ", \"end\": " + s.to() + "}";
    }

    // -- KafkaSource --------------------------------------------------------------------------

    private static void kafka() throws Exception {
        KafkaPartitionSplitSerializer splits = new KafkaPartitionSplitSerializer();
        KafkaPartitionSplit orders0 = new KafkaPartitionSplit(new TopicPartition("orders", 0), 42);
        KafkaPartitionSplit orders1 = new KafkaPartitionSplit(new TopicPartition("orders", 1), 1000, 2000);
        KafkaPartitionSplit earliest =
                new KafkaPartitionSplit(new TopicPartition("clicks", 7), KafkaPartitionSplit.EARLIEST_OFFSET);
        KafkaPartitionSplit committed = new KafkaPartitionSplit(new TopicPartition("clicks", 8),
                KafkaPartitionSplit.COMMITTED_OFFSET, KafkaPartitionSplit.LATEST_OFFSET);
        KafkaPartitionSplit wide = new KafkaPartitionSplit(
                new TopicPartition("tópico-😀", Integer.MAX_VALUE), Long.MAX_VALUE - 1);
        List<KafkaPartitionSplit> all = Arrays.asList(orders0, orders1, earliest, committed, wide);
        for (KafkaPartitionSplit s : all) {
            split("kafka", s.toString(), kafka(s), splits, s);
        }
        // Version 0: SerdeUtils' split assignment per reader (subtask 1 holds none).
        Map<Integer, Set<KafkaPartitionSplit>> assignment = new TreeMap<>();
        assignment.put(0, new LinkedHashSet<>(Arrays.asList(orders0, orders1)));
        assignment.put(1, new LinkedHashSet<>());
        assignment.put(2, new LinkedHashSet<>(Arrays.asList(wide)));
        enumerator("kafka", "version 0: assignments of three readers", 0,
                SerdeUtils.serializeSplitAssignments(assignment, splits),
                "[" + assigned(kafka(orders0), 0) + ", " + assigned(kafka(orders1), 0) + ", "
                        + assigned(kafka(wide), 2) + "]", ", \"subtasks\": [0, 1, 2]");
        // Version 1: topic and partition of each assigned split.
        List<KafkaPartitionSplit> v1 = Arrays.asList(orders0, wide);
        enumerator("kafka", "version 1: assigned partitions", 1, (byte[]) kafkaSerializer("serializeV1",
                        Collection.class).invoke(null, v1),
                "[" + assigned(migrated(orders0), null) + ", " + assigned(migrated(wide), null) + "]", "");
        // Versions 2 and 3: every split with its assignment status, and whether discovery finished.
        Set<SplitAndAssignmentStatus> statuses = new LinkedHashSet<>(Arrays.asList(
                new SplitAndAssignmentStatus(orders0, AssignmentStatus.ASSIGNED),
                new SplitAndAssignmentStatus(earliest, AssignmentStatus.UNASSIGNED),
                new SplitAndAssignmentStatus(committed, AssignmentStatus.ASSIGNED)));
        enumerator("kafka", "version 2: partitions and statuses", 2, (byte[]) kafkaSerializer("serializeV2",
                        Collection.class, boolean.class).invoke(null, statuses, false),
                "[" + assigned(migrated(orders0), null) + ", " + pending(migrated(earliest)) + ", "
                        + assigned(migrated(committed), null) + "]", ", \"initial_discovery_finished\": false");
        KafkaSourceEnumStateSerializer current = new KafkaSourceEnumStateSerializer();
        enumerator("kafka", "version 3: splits and statuses", current.getVersion(),
                current.serialize(new KafkaSourceEnumState(statuses, true)),
                "[" + assigned(kafka(orders0), null) + ", " + pending(kafka(earliest)) + ", "
                        + assigned(kafka(committed), null) + "]", ", \"initial_discovery_finished\": true");
        enumerator("kafka", "version 3: nothing discovered yet", current.getVersion(),
                current.serialize(new KafkaSourceEnumState(new LinkedHashSet<>(), false)), "[]",
                ", \"initial_discovery_finished\": false");
    }

    private static Method kafkaSerializer(String name, Class<?>... parameters) throws Exception {
        Method method = KafkaSourceEnumStateSerializer.class.getDeclaredMethod(name, parameters);
        method.setAccessible(true); // @VisibleForTesting, package-private: the connector's own writers
        return method;
    }

    private static String kafka(KafkaPartitionSplit s) {
        return "{\"topic\": " + str(s.getTopic()) + ", \"partition\": " + s.getPartition()
                + ", \"starting_offset\": " + s.getStartingOffset() + ", \"stopping_offset\": "
                + s.getStoppingOffset().orElse(KafkaPartitionSplit.NO_STOPPING_OFFSET) + "}";
    }

    /** A split as versions 1 and 2 keep it: topic and partition, the offset left to the restore. */
    private static String migrated(KafkaPartitionSplit s) {
        return "{\"topic\": " + str(s.getTopic()) + ", \"partition\": " + s.getPartition()
                + ", \"starting_offset\": " + KafkaPartitionSplit.MIGRATED + ", \"stopping_offset\": "
                + KafkaPartitionSplit.NO_STOPPING_OFFSET + "}";
    }

    // -- FileSource -----------------------------------------------------------------------------

    private static void files() throws Exception {
        FileSourceSplitSerializer splits = FileSourceSplitSerializer.INSTANCE;
        FileSourceSplit local = new FileSourceSplit("0000000001", new Path("file:/data/in/part-0.csv"), 0, 4096,
                1700000000000L, 4096, new String[0], null);
        FileSourceSplit read = new FileSourceSplit("0000000002", new Path(new URI(
                "hdfs://reader@namenode:8020/logs/2026/äpfel.txt?v=2#frag")), 1024, 2048, 1700000001000L, 10240,
                new String[] {"host-a", "host-b"}, new CheckpointedPosition(1500, 7));
        FileSourceSplit skipping = new FileSourceSplit("0000000003", new Path("s3://bucket/x.json"), 0, 100,
                0, 100, new String[] {"h"}, new CheckpointedPosition(CheckpointedPosition.NO_OFFSET, 3));
        for (FileSourceSplit s : Arrays.asList(local, read, skipping)) {
            split("file", s.splitId(), file(s), splits, s);
        }
        PendingSplitsCheckpointSerializer<FileSourceSplit> checkpoints =
                new PendingSplitsCheckpointSerializer<>(splits);
        enumerator("file", "pending splits and processed paths", checkpoints.getVersion(),
                checkpoints.serialize(PendingSplitsCheckpoint.fromCollectionSnapshot(
                        Arrays.asList(local, skipping), Arrays.asList(new Path("file:/data/in/part-0.csv"),
                                new Path("file:/data/in/done-ü.csv")))),
                "[" + pending(file(local)) + ", " + pending(file(skipping)) + "]",
                ", \"processed_paths\": [\"file:/data/in/part-0.csv\", \"file:/data/in/done-ü.csv\"]");
        enumerator("file", "empty", checkpoints.getVersion(),
                checkpoints.serialize(PendingSplitsCheckpoint.fromCollectionSnapshot(new ArrayList<>())), "[]",
                ", \"processed_paths\": []");
    }

    private static String file(FileSourceSplit s) {
        URI uri = s.path().toUri();
        String path = "{\"scheme\": " + str(uri.getScheme()) + ", \"user_info\": " + str(uri.getUserInfo())
                + ", \"host\": " + str(uri.getHost()) + ", \"port\": " + uri.getPort() + ", \"path\": "
                + str(uri.getPath()) + ", \"query\": " + str(uri.getQuery()) + ", \"fragment\": "
                + str(uri.getFragment()) + "}";
        StringBuilder hosts = new StringBuilder("[");
        for (String host : s.hostnames()) {
            hosts.append(hosts.length() > 1 ? ", " : "").append(str(host));
        }
        String position = s.getReaderPosition().map(p -> "[" + p.getOffset() + ", " + p.getRecordsAfterOffset()
                + "]").orElse("null");
        return "{\"split_id\": " + str(s.splitId()) + ", \"path\": " + path + ", \"offset\": " + s.offset()
                + ", \"length\": " + s.length() + ", \"modification_time\": " + s.fileModificationTime()
                + ", \"file_size\": " + s.fileSize() + ", \"hostnames\": " + hosts + "], \"reader_position\": "
                + position + "}";
    }

    // -- output ---------------------------------------------------------------------------------

    private static <T> void split(String source, String name, String fields, SimpleVersionedSerializer<T> serializer,
                                  T split) throws Exception {
        byte[] stored = SimpleVersionedSerialization.writeVersionAndSerialize(serializer, split);
        SPLITS.append(SPLITS.length() > 0 ? ",\n" : "").append("{\"source\": ").append(str(source))
                .append(", \"name\": ").append(str(name)).append(", \"split\": ").append(fields)
                .append(", \"bytes\": ").append(str(hex(stored))).append("}");
    }

    /** The coordinator state SourceCoordinator writes for an enumerator checkpoint of {@code version}. */
    private static void enumerator(String source, String name, int version, byte[] checkpoint, String splits,
                                   String extra) throws Exception {
        SimpleVersionedSerializer<byte[]> asWritten = new SimpleVersionedSerializer<byte[]>() {
            @Override
            public int getVersion() {
                return version;
            }

            @Override
            public byte[] serialize(byte[] bytes) {
                return bytes;
            }

            @Override
            public byte[] deserialize(int v, byte[] bytes) {
                return bytes;
            }
        };
        Method write = Class.forName("org.apache.flink.runtime.source.coordinator.SourceCoordinator")
                .getDeclaredMethod("writeCheckpointBytes", Object.class, SimpleVersionedSerializer.class);
        write.setAccessible(true); // package-private: what SourceCoordinator.checkpointCoordinator stores
        byte[] stored = (byte[]) write.invoke(null, checkpoint, asWritten);
        ENUMERATORS.append(ENUMERATORS.length() > 0 ? ",\n" : "").append("{\"source\": ").append(str(source))
                .append(", \"name\": ").append(str(name)).append(", \"serializer_version\": ").append(version)
                .append(", \"splits\": ").append(splits).append(extra).append(", \"coordinator_state\": ")
                .append(str(hex(stored))).append("}");
    }

    private static String pending(String split) {
        return "{\"split\": " + split + ", \"status\": \"pending\", \"subtask\": null}";
    }

    private static String assigned(String split, Integer subtask) {
        return "{\"split\": " + split + ", \"status\": \"assigned\", \"subtask\": " + subtask + "}";
    }

    private static String str(String text) {
        if (text == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) {
            out.append(String.format("%02x", b & 0xff));
        }
        return out.toString();
    }
}
