package org.pyref.flink;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * Collects, inside the one JVM that runs the mini cluster, what every subtask held when it
 * snapshotted (or restored), and which subtasks have processed all their input.
 *
 * A part is one subtask's view of one operator: {"uid", "subtask", "operator_state":
 * {name: {..., "elements"}}, "keyed_state": {name: {..., "entries"}}, "timers", ...}.
 * {@link #assemble} merges the parts of one checkpoint into truth.json's "operators".
 */
final class Truth {
    /** Parts derived from the fixed input rather than dumped (window contents): valid for any checkpoint. */
    static final long FROM_INPUT = -1;
    /** Parts written by a restored job: no checkpoint. */
    static final long RESTORED = 0;

    private static final class Part {
        final long checkpointId;
        final ObjectNode node;

        Part(long checkpointId, ObjectNode node) {
            this.checkpointId = checkpointId;
            this.node = node;
        }
    }

    private static final List<Part> PARTS = new ArrayList<>();
    private static final Map<String, ObjectNode> DECLARED = new LinkedHashMap<>();
    private static final Map<String, Integer> EXPECTED = new ConcurrentHashMap<>();
    private static final Map<String, Set<Integer>> DONE = new ConcurrentHashMap<>();
    private static final Set<String> BACKENDS = ConcurrentHashMap.newKeySet();

    private Truth() {}

    static synchronized void reset() {
        PARTS.clear();
        DECLARED.clear();
        EXPECTED.clear();
        DONE.clear();
        BACKENDS.clear();
    }

    /** The class of a keyed state backend an operator ran with (proof of the backend the configuration asked for). */
    static void keyedBackend(String className) {
        BACKENDS.add(className);
    }

    static List<String> keyedBackends() {
        List<String> out = new ArrayList<>(BACKENDS);
        out.sort(null);
        return out;
    }

    /** An operator of the job with a uid (listed in the truth even when it holds no state). */
    static synchronized void declare(String uid, int parallelism, int maxParallelism, String keyType) {
        ObjectNode o = Json.object();
        o.put("uid", uid);
        o.put("operator_id", OperatorIds.fromUid(uid));
        o.put("parallelism", parallelism);
        o.put("max_parallelism", maxParallelism);
        if (keyType != null) {
            o.put("key_type", keyType);
        } else {
            o.putNull("key_type");
        }
        DECLARED.put(uid, o);
    }

    static synchronized void put(long checkpointId, ObjectNode part) {
        PARTS.add(new Part(checkpointId, part));
    }

    static ObjectNode part(String uid, int subtask) {
        ObjectNode p = Json.object();
        p.put("uid", uid);
        p.put("subtask", subtask);
        return p;
    }

    /** ``name`` reports done once per subtask; the driver waits for ``parallelism`` distinct subtasks. */
    static void expect(String name, int parallelism) {
        EXPECTED.put(name, parallelism);
    }

    static void done(String name, int subtask) {
        DONE.computeIfAbsent(name, k -> ConcurrentHashMap.newKeySet()).add(subtask);
    }

    /** The names that have not yet reported done from every subtask (empty: the job's state is frozen). */
    static List<String> pending() {
        List<String> out = new ArrayList<>();
        for (Map.Entry<String, Integer> e : new TreeMap<>(EXPECTED).entrySet()) {
            int have = DONE.getOrDefault(e.getKey(), Set.of()).size();
            if (have < e.getValue()) {
                out.add(e.getKey() + " (" + have + "/" + e.getValue() + ")");
            }
        }
        return out;
    }

    /** The highest checkpoint id any part was written for (the savepoint's). */
    static synchronized long lastCheckpoint() {
        long max = RESTORED;
        for (Part p : PARTS) {
            max = Math.max(max, p.checkpointId);
        }
        return max;
    }

    /** truth.json's "operators": every declared operator with the merged parts of ``checkpointId``. */
    static synchronized ObjectNode assemble(long checkpointId) {
        Map<String, ObjectNode> ops = new TreeMap<>();
        for (Map.Entry<String, ObjectNode> e : DECLARED.entrySet()) {
            ObjectNode o = e.getValue().deepCopy();
            o.putObject("operator_state");
            o.putObject("keyed_state");
            o.putObject("timer_services");
            o.putArray("timers");
            o.putNull("coordinator");
            ops.put(e.getKey(), o);
        }
        Map<String, Set<Integer>> seen = new TreeMap<>();
        for (Part p : PARTS) {
            if (p.checkpointId != checkpointId && p.checkpointId != FROM_INPUT) {
                continue;
            }
            String uid = p.node.get("uid").asText();
            ObjectNode o = ops.get(uid);
            if (o == null) {
                throw new IllegalStateException("a part names operator " + uid + ", which the job did not declare");
            }
            if (p.node.has("operator_id") && !p.node.get("operator_id").asText().equals(o.get("operator_id").asText())) {
                throw new IllegalStateException("operator " + uid + ": Flink's id " + p.node.get("operator_id").asText()
                        + " is not the one computed from the uid, " + o.get("operator_id").asText());
            }
            merge(o, p.node);
        }
        for (ObjectNode o : ops.values()) {
            for (JsonNode s : o.get("keyed_state")) {
                ((ObjectNode) s).set("entries", sortedEntries(s.get("entries")));
            }
            for (String list : new String[] {"timers", "fired_timers"}) {
                if (o.has(list)) {
                    List<ObjectNode> ts = new ArrayList<>();
                    o.get(list).forEach(t -> ts.add((ObjectNode) t));
                    o.set(list, Json.sorted(ts, StateDump::timerOrder));
                }
            }
        }
        ObjectNode out = Json.object();
        ops.forEach(out::set);
        return out;
    }

    private static ArrayNode sortedEntries(JsonNode entries) {
        List<ObjectNode> es = new ArrayList<>();
        entries.forEach(e -> es.add((ObjectNode) e));
        return Json.sorted(es, StateDump::entryOrder);
    }

    private static void merge(ObjectNode o, ObjectNode part) {
        int subtask = part.path("subtask").asInt();
        for (String field : new String[] {"parallelism", "max_parallelism"}) {
            if (part.has(field)) {
                o.set(field, part.get(field));
            }
        }
        int parallelism = o.get("parallelism").asInt();
        for (Iterator<Map.Entry<String, JsonNode>> it = part.path("operator_state").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            ObjectNode s = (ObjectNode) o.get("operator_state").get(e.getKey());
            if (s == null) {
                s = ((ObjectNode) e.getValue()).deepCopy();
                s.remove("elements");
                s.remove("decoded");
                s.set("subtasks", emptyLists(parallelism));
                if (e.getValue().has("decoded")) {
                    s.set("decoded", emptyLists(parallelism));
                }
                ((ObjectNode) o.get("operator_state")).set(e.getKey(), s);
            }
            ((ArrayNode) s.get("subtasks")).set(subtask, e.getValue().get("elements"));
            if (e.getValue().has("decoded")) {
                ((ArrayNode) s.get("decoded")).set(subtask, e.getValue().get("decoded"));
            }
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = part.path("keyed_state").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            ObjectNode s = (ObjectNode) o.get("keyed_state").get(e.getKey());
            if (s == null) {
                s = ((ObjectNode) e.getValue()).deepCopy();
                s.putArray("entries");
                ((ObjectNode) o.get("keyed_state")).set(e.getKey(), s);
            }
            ((ArrayNode) s.get("entries")).addAll((ArrayNode) e.getValue().get("entries"));
            if (e.getValue().has("source")) {
                s.set("source", e.getValue().get("source"));
            }
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = part.path("timer_services").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            ((ObjectNode) o.get("timer_services")).set(e.getKey(), e.getValue());
        }
        if (part.has("timers")) {
            ((ArrayNode) o.get("timers")).addAll((ArrayNode) part.get("timers"));
        }
        for (String list : new String[] {"fired_timers", "fired_windows"}) {
            if (part.has(list)) {
                if (!o.has(list)) {
                    o.putArray(list);
                }
                ((ArrayNode) o.get(list)).addAll((ArrayNode) part.get(list));
            }
        }
        if (part.has("coordinator")) {
            o.set("coordinator", part.get("coordinator"));
        }
    }

    private static ArrayNode emptyLists(int n) {
        ArrayNode a = Json.array();
        for (int i = 0; i < n; i++) {
            a.addArray();
        }
        return a;
    }
}
