package org.pyref.flink;

import java.io.Serializable;
import org.apache.flink.api.common.state.AggregatingStateDescriptor;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * One registered state, as the corpus README's truth.json describes it: operator state has a
 * {@code mode} (SPLIT_DISTRIBUTE, UNION, BROADCAST), keyed state a {@code kind} (value, list,
 * map, reducing, aggregating) and a {@code namespace} (void; window: TimeWindow; global: GlobalWindow).
 */
final class StateSpec implements Serializable {
    private static final long serialVersionUID = 1L;

    final String name;
    final String mode;
    final String kind;
    final String type;
    final String keyType;
    final String namespace;
    final String function;
    final Long ttlMillis;
    final String ttlUpdateType;
    final String ttlVisibility;

    private StateSpec(String name, String mode, String kind, String type, String keyType, String namespace,
                      String function, Long ttlMillis, String ttlUpdateType, String ttlVisibility) {
        this.name = name;
        this.mode = mode;
        this.kind = kind;
        this.type = type;
        this.keyType = keyType;
        this.namespace = namespace;
        this.function = function;
        this.ttlMillis = ttlMillis;
        this.ttlUpdateType = ttlUpdateType;
        this.ttlVisibility = ttlVisibility;
    }

    static StateSpec split(String name, String type) {
        return new StateSpec(name, "SPLIT_DISTRIBUTE", null, type, null, null, null, null, null, null);
    }

    static StateSpec union(String name, String type) {
        return new StateSpec(name, "UNION", null, type, null, null, null, null, null, null);
    }

    static StateSpec broadcast(String name, String keyType, String type) {
        return new StateSpec(name, "BROADCAST", null, type, keyType, null, null, null, null, null);
    }

    static StateSpec keyed(String name, String kind, String type) {
        return new StateSpec(name, null, kind, type, null, "void", null, null, null, null);
    }

    static StateSpec map(String name, String userKeyType, String type) {
        return new StateSpec(name, null, "map", type, userKeyType, "void", null, null, null, null);
    }

    StateSpec withFunction(String fn) {
        return new StateSpec(name, mode, kind, type, keyType, namespace, fn, ttlMillis, ttlUpdateType, ttlVisibility);
    }

    StateSpec inNamespace(String ns) {
        return new StateSpec(name, mode, kind, type, keyType, ns, function, ttlMillis, ttlUpdateType, ttlVisibility);
    }

    StateSpec withTtl(long millis) {
        return new StateSpec(name, mode, kind, type, keyType, namespace, function, millis, "OnCreateAndWrite",
                "NeverReturnExpired");
    }

    boolean keyed() {
        return kind != null;
    }

    boolean windowed() {
        return !"void".equals(namespace);
    }

    /** A fresh descriptor of this state (descriptors carry serializers once registered: one per registration). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    StateDescriptor<?, ?> descriptor() {
        TypeInformation t = Types.parse(type);
        StateDescriptor<?, ?> d;
        switch (kind) {
            case "value": d = new ValueStateDescriptor<>(name, t); break;
            case "list": d = new ListStateDescriptor<>(name, t); break;
            case "map": d = new MapStateDescriptor<>(name, Types.parse(keyType), t); break;
            case "reducing": d = new ReducingStateDescriptor<>(name, Functions.reduce(function), t); break;
            case "aggregating": d = new AggregatingStateDescriptor<>(name, Functions.aggregate(function), t); break;
            default: throw new IllegalArgumentException("unknown keyed state kind " + kind);
        }
        if (ttlMillis != null) {
            d.enableTimeToLive(Compat.ttl(ttlMillis)
                    .setUpdateType(StateTtlConfig.UpdateType.valueOf(ttlUpdateType))
                    .setStateVisibility(StateTtlConfig.StateVisibility.valueOf(ttlVisibility))
                    .build());
        }
        return d;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    ListStateDescriptor<Object> listDescriptor() {
        return new ListStateDescriptor<>(name, (TypeInformation) Types.parse(type));
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    MapStateDescriptor<Object, Object> broadcastDescriptor() {
        return new MapStateDescriptor<>(name, (TypeInformation) Types.parse(keyType), (TypeInformation) Types.parse(type));
    }

    ObjectNode toJson() {
        ObjectNode o = Json.object();
        if (keyed()) {
            o.put("kind", kind);
            if (keyType != null) {
                o.put("user_key_type", keyType);
            }
            o.put("type", type);
            o.put("namespace", namespace);
            if (function != null) {
                o.put("function", function);
            }
            if (ttlMillis != null) {
                ObjectNode ttl = o.putObject("ttl");
                ttl.set("ttl_ms", Json.integer(ttlMillis));
                ttl.put("update_type", ttlUpdateType);
                ttl.put("visibility", ttlVisibility);
            } else {
                o.putNull("ttl");
            }
        } else {
            o.put("mode", mode);
            if (keyType != null) {
                o.put("key_type", keyType);
            }
            o.put("type", type);
        }
        return o;
    }

    static StateSpec fromJson(String name, JsonNode o) {
        JsonNode ttl = o.path("ttl");
        boolean hasTtl = ttl.isObject();
        String keyType = o.hasNonNull("user_key_type") ? o.get("user_key_type").asText()
                : o.hasNonNull("key_type") ? o.get("key_type").asText() : null;
        return new StateSpec(name, text(o, "mode"), text(o, "kind"), o.get("type").asText(), keyType,
                o.has("kind") ? o.path("namespace").asText("void") : null, text(o, "function"),
                hasTtl ? ttl.get("ttl_ms").asLong() : null,
                hasTtl ? ttl.path("update_type").asText("OnCreateAndWrite") : null,
                hasTtl ? ttl.path("visibility").asText("NeverReturnExpired") : null);
    }

    private static String text(JsonNode o, String field) {
        return o.hasNonNull(field) ? o.get(field).asText() : null;
    }
}
