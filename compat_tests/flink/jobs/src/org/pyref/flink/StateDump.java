package org.pyref.flink;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.internal.InternalAppendingState;
import org.apache.flink.runtime.state.internal.InternalKvState;
import org.apache.flink.runtime.state.ttl.TtlValue;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

/** Reads registered states back as truth.json fragments: what a subtask holds, value by value. */
final class StateDump {
    private static final String TTL_DECORATOR = "org.apache.flink.runtime.state.ttl.AbstractTtlDecorator";

    private StateDump() {}

    @SuppressWarnings({"unchecked", "rawtypes"})
    static JsonNode encode(Object v, String type, TypeSerializer serializer) throws Exception {
        return Types.isKryo(type) ? Json.kryo(v, serializer) : Json.value(v);
    }

    /** Operator list state (elements in stored order) or broadcast state (pairs sorted by key). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static ObjectNode operatorState(StateSpec s, Object state, StateDescriptor descriptor) throws Exception {
        ObjectNode o = s.toJson();
        ArrayNode elements = o.putArray("elements");
        if ("BROADCAST".equals(s.mode)) {
            MapStateDescriptor d = (MapStateDescriptor) descriptor;
            List<ArrayNode> pairs = new ArrayList<>();
            for (Map.Entry<?, ?> e : ((BroadcastState<?, ?>) state).entries()) {
                ArrayNode pair = Json.array();
                pair.add(encode(e.getKey(), s.keyType, d.getKeySerializer()));
                pair.add(encode(e.getValue(), s.type, d.getValueSerializer()));
                pairs.add(pair);
            }
            o.set("elements", Json.sorted(pairs, p -> Json.text(p.get(0))));
        } else {
            TypeSerializer ser = ((ListStateDescriptor) descriptor).getElementSerializer();
            Iterable<?> it = ((ListState<?>) state).get();
            if (it != null) {
                for (Object x : it) {
                    elements.add(encode(x, s.type, ser));
                }
            }
        }
        return o;
    }

    /** Every (key, namespace) entry of one keyed state, with its key group and, under TTL, its timestamps. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static ObjectNode keyedState(KeyedStateBackend<Object> backend, StateSpec s, Object state, StateDescriptor descriptor,
                                 int maxParallelism, int subtask) throws Exception {
        List<Tuple2<Object, Object>> keys = new ArrayList<>();
        if (s.windowed()) {
            try (Stream<Tuple2<Object, Object>> st = backend.getKeysAndNamespaces(s.name)) {
                st.forEach(t -> keys.add(Tuple2.of(t.f0, t.f1)));
            }
        } else {
            try (Stream<Object> st = backend.getKeys(s.name, VoidNamespace.INSTANCE)) {
                st.forEach(k -> keys.add(Tuple2.of(k, VoidNamespace.INSTANCE)));
            }
        }
        Object raw = s.ttlMillis != null ? original(state) : state;
        List<ObjectNode> entries = new ArrayList<>();
        for (Tuple2<Object, Object> kn : keys) {
            backend.setCurrentKey(kn.f0);
            ((InternalKvState) state).setCurrentNamespace(kn.f1);
            ObjectNode e = Json.object();
            e.set("key", Json.value(kn.f0));
            e.set("namespace", Json.value(kn.f1));
            e.put("key_group", KeyGroupRangeAssignment.assignToKeyGroup(kn.f0, maxParallelism));
            e.put("subtask", subtask);
            if (readKeyed(s, raw, descriptor, e)) {
                entries.add(e);
            }
        }
        ObjectNode o = s.toJson();
        o.set("entries", Json.sorted(entries, StateDump::entryOrder));
        return o;
    }

    static String entryOrder(ObjectNode e) {
        return String.format("%08d %08d %s %s", e.path("subtask").asInt(), e.path("key_group").asInt(),
                Json.text(e.get("key")), Json.text(e.get("namespace")));
    }

    /** Fills e's value (and ttl timestamps); false when the state holds nothing for this key and namespace. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static boolean readKeyed(StateSpec s, Object raw, StateDescriptor descriptor, ObjectNode e) throws Exception {
        boolean ttl = s.ttlMillis != null;
        switch (s.kind) {
            case "value": {
                Object v = ((ValueState) raw).value();
                return v != null && putValue(e, v, ttl, s.type, descriptor.getSerializer());
            }
            case "reducing":
            case "aggregating": {
                Object v = ((InternalAppendingState) raw).getInternal();
                return v != null && putValue(e, v, ttl, s.type, descriptor.getSerializer());
            }
            case "list": {
                TypeSerializer ser = ((ListStateDescriptor) descriptor).getElementSerializer();
                Iterable<?> it = (Iterable<?>) ((ListState) raw).get();
                ArrayNode values = Json.array(), stamps = Json.array();
                if (it != null) {
                    for (Object x : it) {
                        if (ttl) {
                            stamps.add(Json.integer(((TtlValue<?>) x).getLastAccessTimestamp()));
                            x = ((TtlValue<?>) x).getUserValue();
                        }
                        values.add(encode(x, s.type, ser));
                    }
                }
                e.set("value", values);
                if (ttl) {
                    e.set("ttl_timestamps", stamps);
                }
                return values.size() > 0;
            }
            case "map": {
                MapStateDescriptor d = (MapStateDescriptor) descriptor;
                Iterable<Map.Entry<Object, Object>> it = ((MapState) raw).entries();
                List<ArrayNode> rows = new ArrayList<>();
                if (it != null) {
                    for (Map.Entry<Object, Object> x : it) {
                        Object v = x.getValue();
                        ArrayNode row = Json.array();
                        row.add(encode(x.getKey(), s.keyType, d.getKeySerializer()));
                        row.add(encode(ttl ? ((TtlValue<?>) v).getUserValue() : v, s.type, d.getValueSerializer()));
                        if (ttl) {
                            row.add(Json.integer(((TtlValue<?>) v).getLastAccessTimestamp()));
                        }
                        rows.add(row);
                    }
                }
                ArrayNode sorted = Json.sorted(rows, r -> Json.text(r.get(0)));
                ArrayNode pairs = Json.array(), stamps = Json.array();
                for (JsonNode row : sorted) {
                    ArrayNode pair = pairs.addArray();
                    pair.add(row.get(0));
                    pair.add(row.get(1));
                    if (ttl) {
                        stamps.add(row.get(2));
                    }
                }
                e.set("value", pairs);
                if (ttl) {
                    e.set("ttl_timestamps", stamps);
                }
                return pairs.size() > 0;
            }
            default:
                throw new IllegalArgumentException("unknown keyed state kind " + s.kind);
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static boolean putValue(ObjectNode e, Object v, boolean ttl, String type, TypeSerializer ser) throws Exception {
        if (ttl) {
            e.set("value", encode(((TtlValue<?>) v).getUserValue(), type, ser));
            e.set("ttl_timestamp", Json.integer(((TtlValue<?>) v).getLastAccessTimestamp()));
        } else {
            e.set("value", encode(v, type, ser));
        }
        return true;
    }

    static ObjectNode timer(String service, String domain, Object key, Object namespace, long timestamp,
                            int maxParallelism, int subtask) {
        ObjectNode t = Json.object();
        t.put("service", service);
        t.put("domain", domain);
        t.set("key", Json.value(key));
        t.set("namespace", Json.value(namespace));
        t.set("timestamp", Json.integer(timestamp));
        t.put("key_group", KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism));
        t.put("subtask", subtask);
        return t;
    }

    static String timerOrder(JsonNode t) {
        return String.format("%08d %08d %s %s %020d %s %s", t.path("subtask").asInt(), t.path("key_group").asInt(),
                t.path("service").asText(), t.path("domain").asText(), t.path("timestamp").asLong(),
                Json.text(t.get("key")), Json.text(t.get("namespace")));
    }

    /** The state a TTL decorator wraps (values as TtlValue with their last-access timestamps). */
    private static Object original(Object ttlState) throws Exception {
        for (Class<?> c = ttlState.getClass(); c != null; c = c.getSuperclass()) {
            if (c.getName().equals(TTL_DECORATOR)) {
                Field f = c.getDeclaredField("original");
                f.setAccessible(true);
                return f.get(ttlState);
            }
        }
        throw new IllegalStateException(ttlState.getClass() + " is not a TTL state");
    }
}
