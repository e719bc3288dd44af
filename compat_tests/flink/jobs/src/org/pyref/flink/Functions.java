package org.pyref.flink;

import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.java.tuple.Tuple2;

/** The reduce and aggregate functions states name in their spec ("function"), by name. */
final class Functions {
    private Functions() {}

    @SuppressWarnings("rawtypes")
    static ReduceFunction reduce(String name) {
        switch (String.valueOf(name)) {
            case "sum": return (ReduceFunction<Long>) Long::sum;
            case "max": return (ReduceFunction<Long>) Math::max;
            case "sum-f1": return (ReduceFunction<Tuple2<String, Long>>) (a, b) -> Tuple2.of(a.f0, a.f1 + b.f1);
            default: throw new IllegalArgumentException("unknown reduce function " + name);
        }
    }

    @SuppressWarnings("rawtypes")
    static AggregateFunction aggregate(String name) {
        if ("count-sum".equals(name)) {
            return new CountSum();
        }
        throw new IllegalArgumentException("unknown aggregate function " + name);
    }

    /** Counts and sums Long inputs or Event.num; the accumulator (count, sum) is also the result. */
    static final class CountSum implements AggregateFunction<Object, Tuple2<Long, Long>, Tuple2<Long, Long>> {
        @Override
        public Tuple2<Long, Long> createAccumulator() {
            return Tuple2.of(0L, 0L);
        }

        @Override
        public Tuple2<Long, Long> add(Object in, Tuple2<Long, Long> acc) {
            long v = in instanceof Event ? ((Event) in).num : (Long) in;
            return Tuple2.of(acc.f0 + 1, acc.f1 + v);
        }

        @Override
        public Tuple2<Long, Long> getResult(Tuple2<Long, Long> acc) {
            return acc;
        }

        @Override
        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1);
        }
    }
}
