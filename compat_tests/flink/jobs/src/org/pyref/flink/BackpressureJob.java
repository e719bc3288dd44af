package org.pyref.flink;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * A backpressured job for unaligned checkpoints: a fixed source "events" at parallelism 2 emits
 * {@link #EVENTS} events per split as fast as it can into "slow-counter", keyed by "key-i"
 * (i = seq % 20), which sleeps {@link #SLEEP_MS} ms per event while it adds 1 to the key's
 * ValueState&lt;Long&gt; "count". The channels between them are full whenever a checkpoint is taken,
 * so an unaligned checkpoint keeps their buffers as in-flight data (input channel state of the counter,
 * result subpartition state of the source).
 */
final class BackpressureJob {
    static final int PARALLELISM = 2;
    static final int EVENTS = 1500;
    static final int KEYS = 20;
    static final long SLEEP_MS = 2;

    private BackpressureJob() {}

    static void build(JobBuilder b) {
        DataStream<Event> events = b.source("events", PARALLELISM, BackpressureJob::events);
        OperatorSpec counter = new OperatorSpec("slow-counter", "String").state(StateSpec.keyed("count", "value", "Long"));
        b.keyed(events, e -> e.key, counter, new SlowCount(), PARALLELISM);
    }

    static List<Event> events(int split) {
        List<Event> out = new ArrayList<>();
        for (int i = 0; i < EVENTS; i++) {
            Event e = new Event("key-" + (i % KEYS), 1, i);
            e.seq = (long) split * EVENTS + i;
            out.add(e);
        }
        return out;
    }

    static final class SlowCount implements Behaviour {
        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Thread.sleep(SLEEP_MS);
            ValueState<Long> count = op.state("count");
            Long v = count.value();
            count.update((v == null ? 0 : v) + ((Event) element).num);
        }
    }
}
