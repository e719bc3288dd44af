package org.pyref.flink;

import java.util.Map;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Flink 1.14 and older ship no flink-cep jar in lib/, so the CEP job (compat/cep/1.15) is not
 * compiled for them: its "cep" action is refused with this message.
 */
final class CepJob {
    private CepJob() {}

    static final PhasedJob PHASED = new PhasedJob() {
        @Override
        public String[] outputs() {
            throw unavailable();
        }

        @Override
        public void build(StreamExecutionEnvironment env, int phase, int parallelism, int maxParallelism) {
            throw unavailable();
        }

        @Override
        public Map<String, Map<String, Integer>> output() {
            throw unavailable();
        }

        @Override
        public Map<String, Map<String, Integer>> expected(int phase) {
            throw unavailable();
        }
    };

    private static UnsupportedOperationException unavailable() {
        return new UnsupportedOperationException("the CEP job needs Flink 1.15+ (older releases ship no flink-cep jar)");
    }
}
