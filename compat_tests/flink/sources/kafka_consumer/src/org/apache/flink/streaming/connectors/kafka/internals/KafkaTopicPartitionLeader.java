package org.apache.flink.streaming.connectors.kafka.internals;

/**
 * pyref's stand-in for the connector's class of this name, which needs kafka-clients: only
 * {@link KafkaTopicPartition#dropLeaderData} names it, and nothing of it is serialized.
 */
public final class KafkaTopicPartitionLeader {
    private final KafkaTopicPartition topicPartition;

    public KafkaTopicPartitionLeader(KafkaTopicPartition topicPartition) {
        this.topicPartition = topicPartition;
    }

    public KafkaTopicPartition getTopicPartition() {
        return topicPartition;
    }
}
