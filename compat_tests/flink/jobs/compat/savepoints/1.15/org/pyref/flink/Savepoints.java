package org.pyref.flink;

import java.util.concurrent.CompletableFuture;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;

/** Stop-with-savepoint of Flink 1.13 and 1.14 (compat/savepoints/1.14), which has no SavepointFormatType, and 1.15+ (this file). */
final class Savepoints {
    private Savepoints() {}

    /** Stops the job without drain, in the canonical format (not the backend's native one). */
    static CompletableFuture<String> stopCanonical(JobClient client, String target) {
        return client.stopWithSavepoint(false, target, SavepointFormatType.CANONICAL);
    }

    /** Stops the job without drain in the state backend's native format (RocksDB: its own SST files). */
    static CompletableFuture<String> stopNative(JobClient client, String target) {
        return client.stopWithSavepoint(false, target, SavepointFormatType.NATIVE);
    }
}
