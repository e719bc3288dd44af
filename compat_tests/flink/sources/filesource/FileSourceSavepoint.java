package org.pyref.flink.sources;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A real FileSource savepoint for pyref's tests: a job reads the text files of a directory
 * (monitored, so it never finishes) at parallelism 2, one line per millisecond per reader,
 * and is stopped with a canonical savepoint once it has read {@code lines} lines, with both
 * readers in the middle of a file and the third file still pending in the enumerator.
 * Prints {@code PYREF-FILESOURCE <savepoint path> <lines read>}.
 *
 * <p>Arguments: the input directory, the directory for the savepoint, the lines to read first.
 */
public final class FileSourceSavepoint {
    static final AtomicLong READ = new AtomicLong();

    public static void main(String[] args) throws Exception {
        long lines = Long.parseLong(args[2]);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(2);
        FileSource<String> source = FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(args[0]))
                .monitorContinuously(Duration.ofHours(1)).build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "file-source").uid("file-source")
                .map(new Slow()).uid("slow")  // chained to the reader: nothing is buffered between them
                .sinkTo(new DiscardingSink<>()).uid("sink");
        JobClient client = env.executeAsync("pyref FileSource savepoint");
        while (READ.get() < lines) {
            Thread.sleep(10);
        }
        String savepoint = client.stopWithSavepoint(false, args[1], SavepointFormatType.CANONICAL).get();
        System.out.println("PYREF-FILESOURCE " + savepoint + " " + READ.get());
        System.exit(0);
    }

    static final class Slow implements MapFunction<String, String> {
        @Override
        public String map(String line) throws Exception {
            Thread.sleep(1);
            READ.incrementAndGet();
            return line;
        }
    }
}
