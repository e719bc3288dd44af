package org.pyref.flink.sources;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.streaming.connectors.kafka.internals.KafkaTopicPartition;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * Elements of a legacy {@code FlinkKafkaConsumer}'s offsets state, as its serializer writes them
 * ({@link KafkaConsumerSavepoint#createStateSerializer}): one JSON object per line,
 * {@code {"topic": ..., "partition": ..., "offset": ..., "bytes": "<hex>"}}, on standard output.
 * Topics cover Kryo's string forms: empty, one character (never the ASCII form), ASCII of 2 to 63
 * characters (the ASCII form), 64 and more (UTF-8 with a length of one to three bytes), non-ASCII, a
 * surrogate pair, NUL.
 */
public final class KafkaConsumerVectors {
    public static void main(String[] args) throws Exception {
        TupleSerializer<Tuple2<KafkaTopicPartition, Long>> serializer =
                KafkaConsumerSavepoint.createStateSerializer(new ExecutionConfig());
        String[] topics = {
            "orders", "t", "", "ünï-çødé", "clef-\uD834\uDD1E", "nul-\u0000-byte", "x".repeat(63), "y".repeat(64),
            "z".repeat(300), "日本語のトピック", "a".repeat(9000)
        };
        int[] partitions = {0, 1, 63, 64, 8191, Integer.MAX_VALUE};
        long[] offsets = {0L, 42L, -1L, Long.MAX_VALUE, -915623761776L, -915623761775L, -915623761774L, -915623761773L};
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        int i = 0;
        for (String topic : topics) {
            for (int partition : partitions) {
                if (topic.length() > 1000 && partition != 0) {
                    continue;  // one vector of a three-byte length is enough
                }
                long offset = offsets[i++ % offsets.length];
                DataOutputSerializer bytes = new DataOutputSerializer(64);
                serializer.serialize(Tuple2.of(new KafkaTopicPartition(topic, partition), offset), bytes);
                StringBuilder hex = new StringBuilder();
                for (byte b : bytes.getCopyOfBuffer()) {
                    hex.append(String.format("%02x", b));
                }
                out.println("{\"topic\": \"" + escape(topic) + "\", \"partition\": " + partition + ", \"offset\": "
                        + offset + ", \"bytes\": \"" + hex + "\"}");
            }
        }
    }

    private static String escape(String text) {
        StringBuilder escaped = new StringBuilder();
        for (char c : text.toCharArray()) {
            escaped.append(c < 0x20 || c > 0x7e || c == '"' || c == '\\' ? String.format("\\u%04x", (int) c)
                    : String.valueOf(c));
        }
        return escaped.toString();
    }
}
