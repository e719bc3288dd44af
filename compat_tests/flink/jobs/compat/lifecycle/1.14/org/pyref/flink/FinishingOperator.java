package org.pyref.flink;

import org.apache.flink.streaming.api.operators.AbstractStreamOperator;

/** The end-of-input hook of Flink 1.13 (compat/lifecycle/1.13), which has no finish() and closes an operator once its
 * input has ended, and 1.14+ (this file), where finish() does that and close() only releases resources. */
abstract class FinishingOperator<T> extends AbstractStreamOperator<T> {
    private static final long serialVersionUID = 1L;

    /** Called after the whole input has been processed (every event-time timer has fired). */
    abstract void finished() throws Exception;

    @Override
    public void finish() throws Exception {
        super.finish();
        finished();
    }
}
