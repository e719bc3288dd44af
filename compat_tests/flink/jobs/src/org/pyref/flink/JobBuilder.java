package org.pyref.flink;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.transformations.PhysicalTransformation;

/** Builds a corpus job: every operator gets a uid, is declared to {@link Truth}, and says when it is done. */
final class JobBuilder {
    /** The final watermark of every corpus source: event times after it stay pending. */
    static final long END_WATERMARK = 1_000_000L;

    final StreamExecutionEnvironment env;
    final int maxParallelism;

    JobBuilder(StreamExecutionEnvironment env, int maxParallelism) {
        this.env = env;
        this.maxParallelism = maxParallelism;
        env.setMaxParallelism(maxParallelism);
    }

    /** A {@link FixedSource} (uid) and the filter that drops its end markers (uid + "-filter"). */
    DataStream<Event> source(String uid, int parallelism, FixedSource.Generator generator) {
        declare(uid, parallelism, null);
        declare(uid + "-filter", parallelism, null);
        return env.fromSource(FixedSource.idling(uid, parallelism, generator, END_WATERMARK), FixedSource.watermarks(), uid)
                .uid(uid).setParallelism(parallelism)
                .filter(e -> !e.end).uid(uid + "-filter").name(uid + "-filter").setParallelism(parallelism);
    }

    <T> SingleOutputStreamOperator<T> operator(DataStream<T> in, OperatorSpec spec, Behaviour behaviour, int parallelism) {
        return add(in, spec, behaviour, parallelism, spec.uid, END_WATERMARK);
    }

    <T, K> SingleOutputStreamOperator<T> keyed(DataStream<T> in, KeySelector<T, K> key, OperatorSpec spec,
                                              Behaviour behaviour, int parallelism) {
        KeyedStream<T, K> keyed = in.keyBy(key, Types.<K>of(spec.keyType));
        return add(keyed, spec, behaviour, parallelism, spec.uid, END_WATERMARK);
    }

    /** A stateless operator after ``in`` that reports done when the final watermark passed ``in``'s operator. */
    <T> SingleOutputStreamOperator<T> probe(DataStream<T> in, String uid) {
        return operator(in, new OperatorSpec(uid, null), (op, e) -> {}, in.getParallelism());
    }

    /** An operator that reports done itself (see {@link SpecOperator#reportDone}), not by watermark. */
    <T> SingleOutputStreamOperator<T> selfReporting(DataStream<T> in, OperatorSpec spec, Behaviour behaviour, int parallelism) {
        return add(in, spec, behaviour, parallelism, spec.uid, Long.MAX_VALUE);
    }

    private <T> SingleOutputStreamOperator<T> add(DataStream<T> in, OperatorSpec spec, Behaviour behaviour, int parallelism,
                                                 String doneName, long doneWatermark) {
        declare(spec.uid, parallelism, spec.keyType);
        Truth.expect(doneName, parallelism);
        SingleOutputStreamOperator<T> out = in.transform(spec.uid, in.getType(),
                new SpecOperator<T>(spec, behaviour, doneName, doneWatermark)).uid(spec.uid).setParallelism(parallelism);
        ((PhysicalTransformation<?>) out.getTransformation()).setChainingStrategy(ChainingStrategy.ALWAYS);
        return out;
    }

    void declare(String uid, int parallelism, String keyType) {
        Truth.declare(uid, parallelism, maxParallelism, keyType);
    }
}
