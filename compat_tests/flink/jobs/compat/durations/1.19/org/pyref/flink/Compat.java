package org.pyref.flink;

import java.time.Duration;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.streaming.api.datastream.WindowedStream;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.Window;

/** The API calls that changed between Flink 1.18 (compat/durations/1.18) and 1.19+ (this file, also 2.x). */
final class Compat {
    private Compat() {}

    static StateTtlConfig.Builder ttl(long millis) {
        return StateTtlConfig.newBuilder(Duration.ofMillis(millis));
    }

    static TumblingEventTimeWindows tumbling(long sizeMillis) {
        return TumblingEventTimeWindows.of(Duration.ofMillis(sizeMillis));
    }

    static SlidingEventTimeWindows sliding(long sizeMillis, long slideMillis) {
        return SlidingEventTimeWindows.of(Duration.ofMillis(sizeMillis), Duration.ofMillis(slideMillis));
    }

    static EventTimeSessionWindows sessions(long gapMillis) {
        return EventTimeSessionWindows.withGap(Duration.ofMillis(gapMillis));
    }

    static <T, K, W extends Window> WindowedStream<T, K, W> allowedLateness(WindowedStream<T, K, W> w, long millis) {
        return w.allowedLateness(Duration.ofMillis(millis));
    }

    static int subtask(RuntimeContext context) {
        return context.getTaskInfo().getIndexOfThisSubtask();
    }

    static <T, F extends T> Pattern<T, F> within(Pattern<T, F> pattern, long millis) {
        return pattern.within(Duration.ofMillis(millis));
    }
}
