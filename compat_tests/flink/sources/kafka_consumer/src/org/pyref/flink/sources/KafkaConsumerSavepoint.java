package org.pyref.flink.sources;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.DiscardingSink;
import org.apache.flink.streaming.api.functions.source.RichParallelSourceFunction;
import org.apache.flink.streaming.connectors.kafka.internals.KafkaTopicPartition;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * The offsets state of the legacy {@code FlinkKafkaConsumer} (flink-connector-kafka up to 3.x, Flink 1.x),
 * without a Kafka broker: a source function keeps the union list state the consumer keeps, under the
 * consumer's state name and with the serializer the consumer's {@code createStateSerializer} builds
 * ({@code Tuple2<KafkaTopicPartition, Long>}, the partition by Kryo), so its bytes are the consumer's.
 *
 * <p>Partitions {@code orders} 0..4 and {@code ünï-çødé} 0..1 are dealt round-robin over the subtasks;
 * each holds the offset of the last record "read" ({@code orders} p: 1000 + 10 p, {@code ünï-çødé} p: 7 + p).
 *
 * <p>Arguments: {@code save DIR PARALLELISM} stops the job with a canonical savepoint in DIR and prints
 * {@code PYREF-KAFKA-CONSUMER <path>}; {@code restore SAVEPOINT PARALLELISM} restores it and prints
 * {@code PYREF-RESTORED <subtask> <topic> <partition> <offset>} for every entry each subtask got.
 */
public final class KafkaConsumerSavepoint {
    /** {@code FlinkKafkaConsumerBase.OFFSETS_STATE_NAME}. */
    static final String OFFSETS_STATE_NAME = "topic-partition-offset-states";

    static CountDownLatch ready;

    public static void main(String[] args) throws Exception {
        boolean restore = args[0].equals("restore");
        int parallelism = Integer.parseInt(args[2]);
        ready = new CountDownLatch(parallelism);
        Configuration conf = new Configuration();
        if (restore) {
            conf.setString("execution.savepoint.path", args[1]);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);
        env.addSource(new OffsetsSource()).uid("kafka-source").name("Kafka consumer")
                .addSink(new DiscardingSink<>()).uid("sink");
        JobClient client = env.executeAsync("pyref FlinkKafkaConsumer offsets");
        ready.await();
        if (restore) {
            client.cancel().get();
        } else {
            String savepoint = client.stopWithSavepoint(false, args[1], SavepointFormatType.CANONICAL).get();
            System.out.println("PYREF-KAFKA-CONSUMER " + savepoint);
        }
        System.exit(0);
    }

    /** {@code FlinkKafkaConsumerBase.createStateSerializer}, as the connector has it. */
    static TupleSerializer<Tuple2<KafkaTopicPartition, Long>> createStateSerializer(ExecutionConfig executionConfig) {
        TypeSerializer<?>[] fieldSerializers = new TypeSerializer<?>[] {
            new KryoSerializer<>(KafkaTopicPartition.class, executionConfig), LongSerializer.INSTANCE
        };
        @SuppressWarnings("unchecked")
        Class<Tuple2<KafkaTopicPartition, Long>> tupleClass =
                (Class<Tuple2<KafkaTopicPartition, Long>>) (Class<?>) Tuple2.class;
        return new TupleSerializer<>(tupleClass, fieldSerializers);
    }

    static final class OffsetsSource extends RichParallelSourceFunction<Long> implements CheckpointedFunction {
        private transient ListState<Tuple2<KafkaTopicPartition, Long>> offsets;
        private final Map<KafkaTopicPartition, Long> owned = new LinkedHashMap<>();
        private volatile boolean running = true;

        @Override
        @SuppressWarnings("deprecation")
        public void initializeState(FunctionInitializationContext context) throws Exception {
            offsets = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>(
                    OFFSETS_STATE_NAME, createStateSerializer(getRuntimeContext().getExecutionConfig())));
            int subtask = getRuntimeContext().getIndexOfThisSubtask();
            int parallelism = getRuntimeContext().getNumberOfParallelSubtasks();
            if (context.isRestored()) {
                for (Tuple2<KafkaTopicPartition, Long> entry : offsets.get()) {
                    System.out.println("PYREF-RESTORED " + subtask + " " + entry.f0.getTopic() + " "
                            + entry.f0.getPartition() + " " + entry.f1);
                }
                return;
            }
            List<Tuple2<KafkaTopicPartition, Long>> all = new ArrayList<>();
            for (int p = 0; p < 5; p++) {
                all.add(Tuple2.of(new KafkaTopicPartition("orders", p), 1000L + 10 * p));
            }
            for (int p = 0; p < 2; p++) {
                all.add(Tuple2.of(new KafkaTopicPartition("ünï-çødé", p), 7L + p));
            }
            for (int i = subtask; i < all.size(); i += parallelism) {
                owned.put(all.get(i).f0, all.get(i).f1);
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            offsets.clear();
            for (Map.Entry<KafkaTopicPartition, Long> entry : owned.entrySet()) {
                offsets.add(Tuple2.of(entry.getKey(), entry.getValue()));
            }
        }

        @Override
        public void run(SourceContext<Long> ctx) throws Exception {
            ready.countDown();
            while (running) {
                Thread.sleep(10);
            }
        }

        @Override
        public void cancel() {
            running = false;
        }
    }
}
