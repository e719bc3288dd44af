package org.pyref.flink.sources;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

import java.util.List;

/**
 * Restores a NumberSequenceSource of uid "sequence-source" (the corpus's operator-state job's,
 * {@code new NumberSequenceSource(0, 10^12)} at parallelism 1) from each savepoint given, one
 * local mini cluster each, and prints the first numbers it emits after the restore:
 * {@code PYREF-SEQUENCE <savepoint> <n1>,<n2>,...}. A split's state says where it goes on, so
 * the first number is the split's start as the savepoint holds it.
 *
 * <p>Arguments: the restore-path and ignore-unclaimed-state configuration keys of the Flink
 * version, the count of numbers to take, then the savepoint directories.
 */
public final class SequenceRestore {
    private static final long SEQUENCE_END = 1_000_000_000_000L;

    public static void main(String[] args) throws Exception {
        int count = Integer.parseInt(args[2]);
        for (int i = 3; i < args.length; i++) {
            Configuration config = new Configuration();
            config.set(ConfigOptions.key(args[0]).stringType().noDefaultValue(), args[i]);
            config.set(ConfigOptions.key(args[1]).stringType().noDefaultValue(), "true");
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config);
            env.setParallelism(1);
            List<Long> first = env.fromSource(new NumberSequenceSource(0, SEQUENCE_END),
                            WatermarkStrategy.noWatermarks(), "sequence-source")
                    .uid("sequence-source").setParallelism(1)
                    .executeAndCollect(count);
            StringBuilder line = new StringBuilder("PYREF-SEQUENCE ").append(args[i]).append(' ');
            for (int k = 0; k < first.size(); k++) {
                line.append(k > 0 ? "," : "").append(first.get(k));
            }
            System.out.println(line);
        }
    }
}
