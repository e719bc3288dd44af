package org.pyref.flink;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.types.Row;

/**
 * One value state per serializer Flink picks for a type (primitives and boxed forms, String,
 * arrays, Tuple, Row, List, Map, enum, nested POJO, Kryo), keyed by Strings that include
 * non-ASCII and astral-plane characters, at parallelism 2; values include 64-bit integers beyond
 * 2^53, NaN and infinities, and a map state with null values.
 */
final class TypesJob {
    static final int PARALLELISM = 2;
    static final List<String> KEYS = Arrays.asList("plain", "", "κλειδί", "emoji-\uD83D\uDE00", "tab\tand\nnewline",
            "long-" + "x".repeat(200), "k-0", "k-1", "k-2", "k-3", "k-4", "k-5", "k-6", "k-7", "k-8", "k-9");
    static final long[] BIG = {0, 1L << 53, -(1L << 53), (1L << 53) - 1, Long.MAX_VALUE, Long.MIN_VALUE, -1, 42};
    static final double[] DOUBLES = {0.1, -0.0, Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, 1e300,
            Double.MIN_VALUE, 2.5};

    private TypesJob() {}

    static void build(JobBuilder b) {
        DataStream<Event> events = b.source("types-source", PARALLELISM, TypesJob::events);
        OperatorSpec types = new OperatorSpec("types", "String")
                .state(StateSpec.keyed("boolean", "value", "Boolean"))
                .state(StateSpec.keyed("byte", "value", "Byte"))
                .state(StateSpec.keyed("short", "value", "Short"))
                .state(StateSpec.keyed("int", "value", "Integer"))
                .state(StateSpec.keyed("long", "value", "Long"))
                .state(StateSpec.keyed("float", "value", "Float"))
                .state(StateSpec.keyed("double", "value", "Double"))
                .state(StateSpec.keyed("char", "value", "Character"))
                .state(StateSpec.keyed("string", "value", "String"))
                .state(StateSpec.keyed("bytes", "value", "byte[]"))
                .state(StateSpec.keyed("ints", "value", "int[]"))
                .state(StateSpec.keyed("longs", "value", "long[]"))
                .state(StateSpec.keyed("doubles", "value", "double[]"))
                .state(StateSpec.keyed("tuple3", "value", "Tuple3<Integer,String,Double>"))
                .state(StateSpec.keyed("row", "value", "Row<String,Long,Boolean>"))
                .state(StateSpec.keyed("list", "value", "List<String>"))
                .state(StateSpec.keyed("map", "value", "Map<String,Long>"))
                .state(StateSpec.keyed("enum", "value", "enum:org.pyref.flink.Color"))
                .state(StateSpec.keyed("profile", "value", "pojo:org.pyref.flink.Profile"))
                .state(StateSpec.keyed("kryo", "value", "kryo:org.pyref.flink.LegacyBlob"))
                .state(StateSpec.map("nullable-map", "String", "String"));
        b.keyed(events, e -> e.key, types, new Values(), PARALLELISM);
    }

    static List<Event> events(int split) {
        List<Event> out = new ArrayList<>();
        for (int i = split; i < KEYS.size(); i += PARALLELISM) {
            Event e = new Event(KEYS.get(i), i, JobBuilder.END_WATERMARK + 1 + i);
            e.seq = i;
            out.add(e);
        }
        return out;
    }

    static final class Values implements Behaviour {
        @Override
        public void process(SpecOperator<?> op, Object element) throws Exception {
            int i = (int) ((Event) element).num;
            op.<ValueState<Boolean>>state("boolean").update(i % 2 == 0);
            op.<ValueState<Byte>>state("byte").update((byte) (i * 37 - 128));
            op.<ValueState<Short>>state("short").update((short) (i * 4099 - 32768));
            op.<ValueState<Integer>>state("int").update(i * 268435399 - Integer.MAX_VALUE);
            op.<ValueState<Long>>state("long").update(BIG[i % BIG.length]);
            op.<ValueState<Float>>state("float").update((float) DOUBLES[i % DOUBLES.length]);
            op.<ValueState<Double>>state("double").update(DOUBLES[i % DOUBLES.length]);
            op.<ValueState<Character>>state("char").update("aé€Ω\u0000z".charAt(i % 6));
            op.<ValueState<String>>state("string").update(KEYS.get((i + 3) % KEYS.size()));
            byte[] bytes = new byte[i];
            for (int k = 0; k < i; k++) {
                bytes[k] = (byte) (k * 31 + i);
            }
            op.<ValueState<byte[]>>state("bytes").update(bytes);
            op.<ValueState<int[]>>state("ints").update(new int[] {i, -i, Integer.MIN_VALUE});
            op.<ValueState<long[]>>state("longs").update(new long[] {i, BIG[i % BIG.length]});
            op.<ValueState<double[]>>state("doubles").update(new double[] {i / 3.0, DOUBLES[i % DOUBLES.length]});
            op.<ValueState<Tuple3<Integer, String, Double>>>state("tuple3").update(Tuple3.of(i, "t" + i, i * 1.5));
            op.<ValueState<Row>>state("row").update(Row.of("r" + i, (long) i * i, i % 3 == 0 ? null : i % 3 == 1));
            List<String> list = new ArrayList<>();
            for (int k = 0; k < i % 4; k++) {
                list.add("e" + k);
            }
            op.<ValueState<List<String>>>state("list").update(list);
            Map<String, Long> map = new HashMap<>();
            for (int k = 0; k < i % 3 + 1; k++) {
                map.put("m" + k, (long) k * i);
            }
            op.<ValueState<Map<String, Long>>>state("map").update(map);
            op.<ValueState<Color>>state("enum").update(Color.values()[i % 3]);
            Profile p = new Profile();
            p.name = "p" + i;
            p.stats = new PageStats();
            p.stats.views = i;
            p.stats.ratio = i / 8.0;
            p.stats.lastUrl = i % 2 == 0 ? null : "/last/" + i;
            p.tags = Arrays.asList("t" + i, "u" + i);
            p.scores = new HashMap<>();
            p.scores.put("s", i);
            op.<ValueState<Profile>>state("profile").update(p);
            op.<ValueState<LegacyBlob>>state("kryo").update(new LegacyBlob("k" + i, new long[] {i, BIG[i % BIG.length]}));
            MapState<String, String> nullable = op.state("nullable-map");
            nullable.put("present", "v" + i);
            nullable.put("absent", null);
        }
    }
}
