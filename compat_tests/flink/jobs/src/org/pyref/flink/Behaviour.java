package org.pyref.flink;

import java.io.Serializable;

/** What a corpus job's {@link SpecOperator} does with its input (restored jobs have none). */
interface Behaviour extends Serializable {
    void process(SpecOperator<?> op, Object element) throws Exception;

    /** Called in snapshotState before the operator dumps its state: the last chance to update it. */
    default void beforeSnapshot(SpecOperator<?> op, long checkpointId) throws Exception {}

    /** False: the operator's snapshots are recorded without its state (state too large for a truth file). */
    default boolean dumpsState() {
        return true;
    }
}
