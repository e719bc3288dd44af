package org.pyref.flink;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * State of a size worth measuring a reader on (bench/flink_native_read.py), "bulk-N": "bulk"
 * (parallelism 2) keeps ValueState "value" and ListState "log" of one element for each of the String
 * keys "k0000000".."k(N-1)", 2N rows in all. Its state is not dumped to the truth: too large for it.
 */
final class BulkJob {
    static final int PARALLELISM = 2;

    private BulkJob() {}

    static void build(JobBuilder b, int keys) {
        DataStream<Event> events = b.source("bulk-source", 1, split -> {
            List<Event> out = new ArrayList<>(keys);
            for (int i = 0; i < keys; i++) {
                out.add(new Event(String.format("k%07d", i), i, 0));
            }
            return out;
        });
        OperatorSpec bulk = new OperatorSpec("bulk", "String").state(StateSpec.keyed("value", "value", "Long"))
                .state(StateSpec.keyed("log", "list", "Long"));
        b.keyed(events, e -> e.key, bulk, new Bulk(), PARALLELISM);
    }

    static final class Bulk implements Behaviour {
        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            Event e = (Event) element;
            ValueState<Long> value = op.state("value");
            ListState<Long> log = op.state("log");
            value.update(e.num);
            log.add(e.num * 2);
        }

        @Override
        public boolean dumpsState() {
            return false;
        }
    }
}
