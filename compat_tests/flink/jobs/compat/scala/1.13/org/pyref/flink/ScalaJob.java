package org.pyref.flink;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * State of a Scala API job (Flink 1.x): one state per serializer of flink-scala (case class, the
 * Scala API's Tuple2, Option, Either, Try, List, Map, Enumeration, Unit, Nothing), nested (an Option
 * of a case class, a List of tuples, a Map), as value, list and map state, keyed by the types job's
 * Strings (non-ASCII and astral ones among them) at parallelism 2; Nones, Lefts and Rights, Successes
 * and Failures, empty and non-empty collections.
 */
final class ScalaJob {
    static final int PARALLELISM = TypesJob.PARALLELISM;

    private ScalaJob() {}

    static void build(JobBuilder b) {
        DataStream<Event> events = b.source("scala-source", PARALLELISM, TypesJob::events);
        OperatorSpec scala = new OperatorSpec("scala", "String")
                .state(StateSpec.keyed("case-class", "value", "ScalaCaseClass:scala.Tuple3<Integer,String,Double>"))
                .state(StateSpec.keyed("tuple2", "value", "ScalaTuple2<Long,String>"))
                .state(StateSpec.keyed("option", "value", "ScalaOption<ScalaCaseClass:scala.Tuple2<Long,String>>"))
                .state(StateSpec.keyed("option-nothing", "value", "ScalaOption<ScalaNothing>"))
                .state(StateSpec.keyed("either", "value", "ScalaEither<String,Long>"))
                .state(StateSpec.keyed("list", "value", "ScalaList<ScalaTuple2<String,Integer>>"))
                .state(StateSpec.keyed("map", "value", "ScalaMap<String,Long>"))
                .state(StateSpec.keyed("enum", "value", "ScalaRoundingMode"))
                .state(StateSpec.keyed("try", "value", "ScalaTry<Long>"))
                .state(StateSpec.keyed("unit", "value", "ScalaUnit"))
                .state(StateSpec.keyed("options", "list", "ScalaOption<String>"))
                .state(StateSpec.map("eithers", "String", "ScalaEither<Integer,String>"));
        b.keyed(events, e -> e.key, scala, new Values(), PARALLELISM);
    }

    static final class Values implements Behaviour {
        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public void process(SpecOperator<?> op, Object element) throws Exception {
            int i = (int) ((Event) element).num;
            op.<ValueState<Object>>state("case-class").update(new scala.Tuple3<>(i, "c" + i, i * 0.5));
            op.<ValueState<Object>>state("tuple2").update(new scala.Tuple2<>((long) i << 40, "t" + i));
            op.<ValueState<Object>>state("option").update(
                    i % 3 == 0 ? scala.None$.MODULE$ : scala.Option.apply(new scala.Tuple2<>((long) -i, "o" + i)));
            op.<ValueState<Object>>state("option-nothing").update(scala.None$.MODULE$);
            op.<ValueState<Object>>state("either").update(
                    i % 2 == 0 ? new scala.util.Left<>("l" + i) : new scala.util.Right<>((long) i * 1000));
            scala.collection.immutable.List list = scala.collection.immutable.List$.MODULE$.empty();
            for (int k = i % 4; k > 0; k--) {
                list = list.$colon$colon(new scala.Tuple2<>("e" + k, k * i));
            }
            op.<ValueState<Object>>state("list").update(list);
            scala.collection.immutable.Map map = scala.collection.immutable.Map$.MODULE$.empty();
            for (int k = 0; k < i % 3 + 1; k++) {
                map = map.$plus(new scala.Tuple2<>("m" + k, (long) k * i));
            }
            op.<ValueState<Object>>state("map").update(map);
            op.<ValueState<Object>>state("enum").update(scala.math.BigDecimal.RoundingMode$.MODULE$.apply(i % 8));
            op.<ValueState<Object>>state("try").update(i % 4 == 3
                    ? new scala.util.Failure<>(new IllegalStateException("failed " + i))
                    : new scala.util.Success<>((long) i * i));
            op.<ValueState<Object>>state("unit").update(scala.runtime.BoxedUnit.UNIT);
            ListState<Object> options = op.state("options");
            options.add(scala.Option.apply("first-" + i));
            options.add(scala.None$.MODULE$);
            options.add(scala.Option.apply("last-" + i));
            MapState<String, Object> eithers = op.state("eithers");
            eithers.put("left", new scala.util.Left<>(i));
            eithers.put("right", new scala.util.Right<>("r" + i));
        }
    }
}
