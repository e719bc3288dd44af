package org.pyref.flink;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.SerializationFeature;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.JsonNodeFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.types.Row;

/**
 * State values as JSON, by the rules of the corpus README ("Values in JSON"): 64-bit integers
 * are JSON numbers when |x| < 2^53, else decimal strings; byte[] is lowercase hex, other
 * arrays are arrays; a Tuple is an array; a Row is {"kind", "fields"}; an enum is its name; a
 * POJO (or any other object) is an object of its fields sorted by name; a map is an array of
 * [key, value] pairs sorted by the key's JSON text; a TimeWindow is {"start", "end"}, the
 * GlobalWindow "global", VoidNamespace null; a Kryo-serialized value is {"class", "fields",
 * "bytes"} where bytes are exactly what its serializer writes; Scala values as ScalaTypes (compat/scala) says.
 */
final class Json {
    static final ObjectMapper MAPPER = new ObjectMapper().enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS);
    static final JsonNodeFactory F = JsonNodeFactory.instance;
    private static final long SAFE = 1L << 53;

    private Json() {}

    static ObjectNode object() {
        return F.objectNode();
    }

    static ArrayNode array() {
        return F.arrayNode();
    }

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return sb.toString();
    }

    static JsonNode integer(long v) {
        return Math.abs(v) < SAFE ? F.numberNode(v) : F.textNode(Long.toString(v));
    }

    static String text(JsonNode node) {
        try {
            return MAPPER.writeValueAsString(node);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** A value whose state type is ``kryo:...``: its fields and the bytes its serializer writes. */
    static <T> JsonNode kryo(T v, TypeSerializer<T> serializer) throws Exception {
        if (v == null) {
            return F.nullNode();
        }
        ObjectNode o = object();
        o.put("class", v.getClass().getName());
        o.set("fields", fields(v));
        DataOutputSerializer out = new DataOutputSerializer(64);
        serializer.serialize(v, out);
        o.put("bytes", hex(out.getCopyOfBuffer()));
        return o;
    }

    static JsonNode value(Object v) {
        if (v == null || v instanceof VoidNamespace) {
            return F.nullNode();
        }
        if (v instanceof Boolean) {
            return F.booleanNode((Boolean) v);
        }
        if (v instanceof Long) {
            return integer((Long) v);
        }
        if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
            return F.numberNode(((Number) v).intValue());
        }
        if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isFinite(d)) {
                return F.numberNode(d);
            }
            return F.textNode(Double.isNaN(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
        }
        if (v instanceof String || v instanceof Character) {
            return F.textNode(v.toString());
        }
        if (v instanceof byte[]) {
            return F.textNode(hex((byte[]) v));
        }
        if (v.getClass().isArray()) {
            ArrayNode a = array();
            for (int i = 0; i < java.lang.reflect.Array.getLength(v); i++) {
                a.add(value(java.lang.reflect.Array.get(v, i)));
            }
            return a;
        }
        if (v instanceof Row) {
            Row row = (Row) v;
            ObjectNode o = object();
            o.put("kind", row.getKind().shortString());
            ArrayNode fields = o.putArray("fields");
            for (int i = 0; i < row.getArity(); i++) {
                fields.add(value(row.getField(i)));
            }
            return o;
        }
        if (v instanceof Tuple) {
            Tuple t = (Tuple) v;
            ArrayNode a = array();
            for (int i = 0; i < t.getArity(); i++) {
                a.add(value(t.getField(i)));
            }
            return a;
        }
        if (v instanceof TimeWindow) {
            ObjectNode o = object();
            o.set("start", integer(((TimeWindow) v).getStart()));
            o.set("end", integer(((TimeWindow) v).getEnd()));
            return o;
        }
        if (v instanceof GlobalWindow) {
            return F.textNode("global");
        }
        if (v instanceof Enum) {
            return F.textNode(((Enum<?>) v).name());
        }
        if (v instanceof Map) {
            return pairs(((Map<?, ?>) v).entrySet());
        }
        if (v instanceof Iterable) {
            ArrayNode a = array();
            for (Object x : (Iterable<?>) v) {
                a.add(value(x));
            }
            return a;
        }
        JsonNode scala = ScalaTypes.json(v);
        return scala != null ? scala : fields(v);
    }

    /** Map entries as [key, value] pairs sorted by the key's JSON text. */
    static ArrayNode pairs(Iterable<? extends Map.Entry<?, ?>> entries) {
        List<ArrayNode> out = new ArrayList<>();
        for (Map.Entry<?, ?> e : entries) {
            ArrayNode pair = array();
            pair.add(value(e.getKey()));
            pair.add(value(e.getValue()));
            out.add(pair);
        }
        return sorted(out, p -> text(p.get(0)));
    }

    static <T extends JsonNode> ArrayNode sorted(List<T> nodes, java.util.function.Function<T, String> key) {
        nodes.sort(Comparator.comparing(key));
        ArrayNode a = array();
        nodes.forEach(a::add);
        return a;
    }

    private static ObjectNode fields(Object v) {
        Map<String, JsonNode> fields = new TreeMap<>();
        for (Class<?> c = v.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                int m = f.getModifiers();
                if (Modifier.isStatic(m) || Modifier.isTransient(m)) {
                    continue;
                }
                f.setAccessible(true);
                try {
                    fields.putIfAbsent(f.getName(), value(f.get(v)));
                } catch (IllegalAccessException e) {
                    throw new IllegalStateException(e);
                }
            }
        }
        ObjectNode o = object();
        fields.forEach(o::set);
        return o;
    }
}
