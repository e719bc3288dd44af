package org.pyref.flink;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/** The states and timer services of one operator (by uid), as a job spec or a truth.json operator lists them. */
final class OperatorSpec implements Serializable {
    private static final long serialVersionUID = 1L;

    final String uid;
    final String keyType;
    final List<StateSpec> states = new ArrayList<>();
    /** Timer service name -> namespace ("void" or "window"). */
    final Map<String, String> timerServices = new LinkedHashMap<>();

    OperatorSpec(String uid, String keyType) {
        this.uid = uid;
        this.keyType = keyType;
    }

    OperatorSpec state(StateSpec s) {
        if (s.keyed() && keyType == null) {
            throw new IllegalArgumentException(uid + ": keyed state " + s.name + " on an operator without a key type");
        }
        states.add(s);
        return this;
    }

    OperatorSpec timers(String service, String namespace) {
        timerServices.put(service, namespace);
        return this;
    }

    boolean keyed() {
        return keyType != null;
    }

    /** From a job spec's or truth.json's operator: uid, key_type, operator_state, keyed_state, timer_services. */
    static OperatorSpec fromJson(JsonNode o) {
        OperatorSpec spec = new OperatorSpec(o.get("uid").asText(), o.hasNonNull("key_type") ? o.get("key_type").asText() : null);
        for (String section : new String[] {"operator_state", "keyed_state"}) {
            for (Iterator<Map.Entry<String, JsonNode>> it = o.path(section).fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                spec.state(StateSpec.fromJson(e.getKey(), e.getValue()));
            }
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = o.path("timer_services").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            spec.timers(e.getKey(), e.getValue().path("namespace").asText("void"));
        }
        return spec;
    }
}
