package org.pyref.flink;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * A retained checkpoint instead of a savepoint: the job runs with periodic checkpoints retained on
 * cancellation (the configuration says so); once its state is frozen, the driver waits for a checkpoint
 * that every subtask started after that, cancels the job and names the checkpoint Flink kept.
 */
final class Checkpoints {
    private Checkpoints() {}

    /** Waits for a completed checkpoint newer than ``frozenAfter``, cancels; returns the retained one's id. A job whose
     *  state is frozen passes the newest snapshot taken so far (one any subtask snapshotted before may hold state from
     *  before the freeze); a job still under way (in-flight data) the first checkpoints' ids, skipped. */
    static long retain(JobClient client, Path root, long frozenAfter, long timeoutMs, ObjectNode result) throws Exception {
        long started = System.nanoTime();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (newest(root) <= frozenAfter) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("no checkpoint after " + frozenAfter + " completed in " + timeoutMs + " ms");
            }
            Thread.sleep(50);
        }
        client.cancel().get(timeoutMs, TimeUnit.MILLISECONDS);
        try {
            client.getJobExecutionResult().get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (ExecutionException cancelled) {
            // A cancelled job's result is this error; the mini cluster has shut down and Flink kept the checkpoint.
        }
        long id = newest(root);
        result.put("checkpoint_seconds", (System.nanoTime() - started) / 1e9);
        return id;
    }

    /** The highest N of a root/JOB/chk-N holding _metadata (Flink writes it when the checkpoint completes), or -1. */
    private static long newest(Path root) throws Exception {
        if (!Files.isDirectory(root)) {
            return -1;
        }
        long max = -1;
        try (Stream<Path> dirs = Files.list(root)) {
            for (Path job : (Iterable<Path>) dirs::iterator) {
                if (!Files.isDirectory(job)) {
                    continue;
                }
                try (Stream<Path> chks = Files.list(job)) {
                    for (Path chk : (Iterable<Path>) chks::iterator) {
                        String name = chk.getFileName().toString();
                        if (name.startsWith("chk-") && Files.isRegularFile(chk.resolve("_metadata"))) {
                            max = Math.max(max, Long.parseLong(name.substring(4)));
                        }
                    }
                }
            }
        }
        return max;
    }
}
