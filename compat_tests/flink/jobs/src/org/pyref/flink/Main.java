package org.pyref.flink;

import java.io.File;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.type.TypeReference;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Runs the tasks of a request file in this one JVM, one local mini cluster per task, and prints
 * one JSON line per task. Request: {"tasks": [...]}, each task either
 * <ul>
 *   <li>{"action": "generate", "job": NAME, "max_parallelism": N, "config": {FLINK KEY: VALUE}, "out": DIR}:
 *       runs the corpus job, waits until every subtask processed its fixed input, takes a canonical
 *       stop-with-savepoint into DIR/savepoint and writes DIR/truth.json; with "checkpoint_dir": CKPT (the
 *       configured checkpoint directory, checkpoints periodic and retained on cancellation) it cancels the job
 *       after a checkpoint of its frozen state instead (see {@link Checkpoints}), with "in_flight": true after a
 *       checkpoint taken while it is still under way (a backpressured job's: buffers in flight); truth.json is
 *       that checkpoint's;
 *       with "savepoint_format": "native" the savepoint is in the state backend's native format;</li>
 *   <li>{"action": "restore", "spec": {"operators": [...]}, "parallelism": P, "config": {...}, "out": FILE}:
 *       restores the savepoint named in config into {@link RestoreJob} and writes what it read to FILE;</li>
 *   <li>{"action": "sql", "phase": 1 or 2, "parallelism": P, "max_parallelism": N, "config": {...}, "out": DIR,
 *       "before"?: CHANGELOG}: runs {@link SqlJob} until the changelog ("before" plus this run's) is the expected
 *       one (phase 1: then a canonical stop-with-savepoint into DIR/savepoint; phase 2, restored from the
 *       savepoint named in config: or until timeout_s, then it is cancelled) and writes DIR/sql.json
 *       ({"changelog": this run's, "expected": the whole input's up to this phase}).</li>
 *   <li>{"action": "cep", ...}: the same as "sql" for {@link CepJob} (its changelog: the matches of each
 *       pattern), written to DIR/cep.json.</li>
 * </ul>
 */
public final class Main {
    /** An "in_flight" task retains a checkpoint after these, taken once the job's channels are full. */
    private static final long IN_FLIGHT_SKIPPED_CHECKPOINTS = 2;

    private Main() {}

    public static void main(String[] args) throws Exception {
        JsonNode request = Json.MAPPER.readTree(new File(args[0]));
        int i = 0;
        for (JsonNode task : request.get("tasks")) {
            ObjectNode result = Json.object();
            result.put("task", i++);
            long start = System.nanoTime();
            try {
                Truth.reset();
                String action = task.get("action").asText();
                if ("generate".equals(action)) {
                    generate(task, result);
                } else if ("sql".equals(action)) {
                    phased(task, result, SqlJob.PHASED, "sql");
                } else if ("cep".equals(action)) {
                    phased(task, result, CepJob.PHASED, "cep");
                } else {
                    restore(task, result);
                }
                result.put("ok", true);
            } catch (Throwable t) {
                StringWriter trace = new StringWriter();
                t.printStackTrace(new PrintWriter(trace));
                result.put("ok", false);
                result.put("error", trace.toString());
            }
            result.put("seconds", (System.nanoTime() - start) / 1e9);
            Truth.keyedBackends().forEach(result.putArray("keyed_state_backends")::add);
            System.out.println("PYREF-RESULT " + Json.text(result));
            System.out.flush();
        }
        System.exit(0);
    }

    private static Configuration config(JsonNode task) {
        Map<String, String> map = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = task.path("config").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            map.put(e.getKey(), e.getValue().asText());
        }
        return Configuration.fromMap(map);
    }

    private static long timeoutMs(JsonNode task) {
        return task.path("timeout_s").asLong(300) * 1000;
    }

    /** The task's output directory, created. */
    private static Path outDir(JsonNode task) throws Exception {
        Path out = Paths.get(task.get("out").asText());
        Files.createDirectories(out);
        return out;
    }

    private static void generate(JsonNode task, ObjectNode result) throws Exception {
        String job = task.get("job").asText();
        Path out = outDir(task);
        long timeoutMs = timeoutMs(task);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config(task));
        JobBuilder b = new JobBuilder(env, task.get("max_parallelism").asInt());
        Jobs.build(job, b);
        JobClient client = env.executeAsync(job);
        long deadline = System.currentTimeMillis() + timeoutMs;
        // A backpressured job's checkpoint is taken while it is under way, with buffers in flight.
        boolean inFlight = task.path("in_flight").asBoolean(false);
        while (!inFlight && !Truth.pending().isEmpty()) {
            if (client.getJobStatus().get().isGloballyTerminalState()) {
                client.getJobExecutionResult().get();
                throw new IllegalStateException("job " + job + " ended before its state was frozen");
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("job " + job + ": still not done after " + timeoutMs + " ms: " + Truth.pending());
            }
            Thread.sleep(100);
        }
        long checkpointId;
        if (task.path("checkpoint_dir").isTextual()) {
            checkpointId = Checkpoints.retain(client, Paths.get(task.get("checkpoint_dir").asText()),
                    inFlight ? IN_FLIGHT_SKIPPED_CHECKPOINTS : Truth.lastCheckpoint(), timeoutMs, result);
        } else {
            stopWithSavepoint(client, out, timeoutMs, result, "native".equals(task.path("savepoint_format").asText()));
            checkpointId = Truth.lastCheckpoint();
        }
        ObjectNode truth = Json.object();
        truth.put("schema", "pyref-flink-truth/1");
        if (task.path("truth").isObject()) {
            truth.setAll((ObjectNode) task.get("truth").deepCopy());
        }
        truth.put("job", job);
        truth.put("checkpoint_id", checkpointId);
        truth.put("end_watermark", JobBuilder.END_WATERMARK);
        truth.set("operators", Truth.assemble(checkpointId));
        write(out.resolve("truth.json"), truth);
        result.put("checkpoint_id", checkpointId);
    }

    /** Stops the job with a canonical (or native-format) savepoint, moved to out/savepoint. */
    private static void stopWithSavepoint(JobClient client, Path out, long timeoutMs, ObjectNode result,
                                          boolean nativeFormat) throws Exception {
        long frozen = System.nanoTime();
        Path target = out.resolve(".flink-savepoints");
        String uri = target.toUri().toString();
        String savepoint = (nativeFormat ? Savepoints.stopNative(client, uri) : Savepoints.stopCanonical(client, uri))
                .get(timeoutMs, TimeUnit.MILLISECONDS);
        client.getJobExecutionResult().get(timeoutMs, TimeUnit.MILLISECONDS);
        result.put("savepoint_seconds", (System.nanoTime() - frozen) / 1e9);
        Path written = Paths.get(new java.net.URI(savepoint.startsWith("file:") ? savepoint : "file://" + savepoint));
        Files.move(written, out.resolve("savepoint"));
        Files.delete(target);
        result.put("flink_savepoint_path", savepoint);
    }

    private static void phased(JsonNode task, ObjectNode result, PhasedJob job, String name) throws Exception {
        int phase = task.get("phase").asInt();
        Path out = outDir(task);
        long timeoutMs = timeoutMs(task);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config(task));
        job.build(env, phase, task.get("parallelism").asInt(), task.get("max_parallelism").asInt());
        Map<String, Map<String, Integer>> before = task.has("before") ? Json.MAPPER.convertValue(task.get("before"),
                new TypeReference<Map<String, Map<String, Integer>>>() {}) : Map.of();
        Map<String, Map<String, Integer>> expected = job.expected(phase);
        JobClient client = env.executeAsync("pyref-" + name + "-" + phase);
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!expected.equals(job.plus(before, job.output())) && System.currentTimeMillis() < deadline) {
            if (client.getJobStatus().get().isGloballyTerminalState()) {
                client.getJobExecutionResult().get();
                throw new IllegalStateException("the " + name + " job ended before its input was processed");
            }
            Thread.sleep(100);
        }
        if (phase == 1) {
            if (!expected.equals(job.output())) {
                throw new IllegalStateException("phase 1 of the " + name + " job: no expected changelog after " + timeoutMs + " ms: "
                        + job.output() + ", expected " + expected);
            }
            stopWithSavepoint(client, out, timeoutMs, result, false);
        } else {
            client.cancel().get(timeoutMs, TimeUnit.MILLISECONDS);
        }
        ObjectNode written = Json.object();
        written.set("changelog", Json.MAPPER.valueToTree(job.output()));
        written.set("expected", Json.MAPPER.valueToTree(expected));
        write(out.resolve(name + ".json"), written);
    }

    private static void restore(JsonNode task, ObjectNode result) throws Exception {
        int parallelism = task.get("parallelism").asInt();
        long timeoutMs = timeoutMs(task);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config(task));
        RestoreJob.build(env, task.get("spec"), parallelism);
        JobClient client = env.executeAsync("pyref-restore");
        client.getJobExecutionResult().get(timeoutMs, TimeUnit.MILLISECONDS);
        ObjectNode dump = Json.object();
        dump.put("schema", "pyref-flink-truth/1");
        dump.put("restored_parallelism", parallelism);
        dump.set("operators", Truth.assemble(Truth.RESTORED));
        write(Paths.get(task.get("out").asText()), dump);
    }

    private static void write(Path path, JsonNode node) throws Exception {
        Files.write(path, (Json.text(node) + "\n")
                .getBytes(StandardCharsets.UTF_8));
    }
}
