package org.pyref.flink;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * The seeds' scenario (pyref.testing.write_seeds): a Kafka-like source operator "kafka-source"
 * at parallelism 2 keeps the next offset of each of its two partitions as SPLIT_DISTRIBUTE list
 * state "offsets" ([100, 101] and [200, 201]); "url-counter" keeps a count per URL as keyed
 * ValueState&lt;Long&gt; "count" ("/page/i" -> i, i = 0..49). The messages come from a fixed
 * source "kafka-broker" whose split i carries partitions 2i and 2i+1.
 */
final class SeedsJob {
    static final int PARALLELISM = 2;
    static final long[] NEXT_OFFSETS = {100, 101, 200, 201};
    static final int URLS = 50;

    private SeedsJob() {}

    static void build(JobBuilder b) {
        DataStream<Event> messages = b.source("kafka-broker", PARALLELISM, SeedsJob::messages);
        OperatorSpec source = new OperatorSpec("kafka-source", null).state(StateSpec.split("offsets", "Long"));
        DataStream<Event> urls = b.operator(messages, source, new Offsets(), PARALLELISM);
        OperatorSpec counter = new OperatorSpec("url-counter", "String").state(StateSpec.keyed("count", "value", "Long"));
        b.keyed(urls, e -> e.key, counter, new Count(), PARALLELISM);
    }

    /** URL i is a message on partition i % 4 with weight i; a partition's offsets run up to its next offset. */
    static List<Event> messages(int split) {
        List<Event> out = new ArrayList<>();
        for (int partition = 2 * split; partition < 2 * split + 2; partition++) {
            List<Integer> urls = new ArrayList<>();
            for (int i = partition; i < URLS; i += 4) {
                urls.add(i);
            }
            for (int k = 0; k < urls.size(); k++) {
                int i = urls.get(k);
                Event e = new Event("/page/" + i, i, i);
                e.part = partition;
                e.offset = NEXT_OFFSETS[partition] - urls.size() + k;
                out.add(e);
            }
        }
        return out;
    }

    /** The source operator: the next offset per partition, written to "offsets" at each snapshot. */
    static final class Offsets implements Behaviour {
        private transient TreeMap<Integer, Long> next;

        @Override
        public void process(SpecOperator<?> op, Object element) {
            Event e = (Event) element;
            if (next == null) {
                next = new TreeMap<>();
            }
            next.put(e.part, e.offset + 1);
        }

        @Override
        public void beforeSnapshot(SpecOperator<?> op, long checkpointId) throws Exception {
            ListState<Long> offsets = op.state("offsets");
            offsets.update(next == null ? new ArrayList<>() : new ArrayList<>(next.values()));
        }
    }

    static final class Count implements Behaviour {
        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            ValueState<Long> count = op.state("count");
            Long v = count.value();
            count.update((v == null ? 0 : v) + ((Event) element).num);
        }
    }
}
