package org.pyref.flink;

/** Flink 1.x has no async state API (2.0 added it with ForSt): the async-state job (compat/async/2.0) is refused. */
final class AsyncStateJob {
    private AsyncStateJob() {}

    static void build(JobBuilder b) {
        throw new UnsupportedOperationException("the async-state job needs Flink 2.0+ (the async state API)");
    }
}
