package org.pyref.flink;

import java.util.HashSet;
import java.util.Set;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * A job that restores a savepoint into one {@link SpecOperator} per operator of a job spec
 * (same uid, same states and serializers, same key type), fed by an empty bounded source:
 * each subtask writes what it restored, its end of input fires every event-time timer (which
 * the operator records), and the job finishes. The operators the spec lists under
 * "window_operators" are instead the real window operators of {@link WindowsJob}, which record
 * every window that fires (its key, window and result).
 */
final class RestoreJob {
    static final String SOURCE_UID = "pyref-restore-source";

    private RestoreJob() {}

    /** A key selector for a stream that carries no records: the key type is all that matters. */
    private static final class NoKey implements KeySelector<Event, Object> {
        @Override
        public Object getKey(Event e) {
            throw new IllegalStateException("the restore job's source emits no records");
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void build(StreamExecutionEnvironment env, JsonNode spec, int parallelism) {
        DataStream<Event> source = env.fromSource(FixedSource.empty(SOURCE_UID, parallelism), WatermarkStrategy.noWatermarks(),
                SOURCE_UID).uid(SOURCE_UID).setParallelism(parallelism);
        Set<String> windows = new HashSet<>();
        spec.path("window_operators").forEach(w -> windows.add(w.asText()));
        for (JsonNode o : spec.get("operators")) {
            OperatorSpec os = OperatorSpec.fromJson(o);
            int p = o.path("parallelism").asInt(parallelism);
            DataStream<Event> in = os.keyed()
                    ? source.keyBy((KeySelector) new NoKey(), (TypeInformation) Types.parse(os.keyType)) : source;
            SingleOutputStreamOperator<?> out = windows.contains(os.uid) ? WindowsJob.restore(source, os.uid, p)
                    : in.transform(os.uid, source.getType(), new SpecOperator<Event>(os, null, null, Long.MAX_VALUE))
                            .uid(os.uid).setParallelism(p);
            int maxParallelism = o.path("max_parallelism").asInt(-1);
            if (maxParallelism > 0) {
                out.setMaxParallelism(maxParallelism);
            }
            Truth.declare(os.uid, p, maxParallelism, os.keyType);
        }
    }
}
