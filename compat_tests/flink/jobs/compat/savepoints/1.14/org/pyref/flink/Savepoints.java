package org.pyref.flink;

import java.util.concurrent.CompletableFuture;
import org.apache.flink.core.execution.JobClient;

/** Stop-with-savepoint of Flink 1.13 and 1.14 (this file), which has no SavepointFormatType, and 1.15+ (compat/savepoints/1.15). */
final class Savepoints {
    private Savepoints() {}

    /** Stops the job without drain; 1.13 and 1.14 write only canonical savepoints, so it needs no format. */
    static CompletableFuture<String> stopCanonical(JobClient client, String target) {
        return client.stopWithSavepoint(false, target);
    }

    /** Native-format savepoints came with Flink 1.15. */
    static CompletableFuture<String> stopNative(JobClient client, String target) {
        throw new UnsupportedOperationException("Flink 1.13 and 1.14 take canonical savepoints only");
    }
}
