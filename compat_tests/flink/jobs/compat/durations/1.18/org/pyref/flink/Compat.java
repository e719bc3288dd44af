package org.pyref.flink;

import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.streaming.api.datastream.WindowedStream;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.time.Time;
import org.apache.flink.streaming.api.windowing.windows.Window;

/** The API calls that changed between Flink 1.18 (this file) and 1.19+ (compat/durations/1.19). */
final class Compat {
    private Compat() {}

    static StateTtlConfig.Builder ttl(long millis) {
        return StateTtlConfig.newBuilder(org.apache.flink.api.common.time.Time.milliseconds(millis));
    }

    static TumblingEventTimeWindows tumbling(long sizeMillis) {
        return TumblingEventTimeWindows.of(Time.milliseconds(sizeMillis));
    }

    static SlidingEventTimeWindows sliding(long sizeMillis, long slideMillis) {
        return SlidingEventTimeWindows.of(Time.milliseconds(sizeMillis), Time.milliseconds(slideMillis));
    }

    static EventTimeSessionWindows sessions(long gapMillis) {
        return EventTimeSessionWindows.withGap(Time.milliseconds(gapMillis));
    }

    static <T, K, W extends Window> WindowedStream<T, K, W> allowedLateness(WindowedStream<T, K, W> w, long millis) {
        return w.allowedLateness(Time.milliseconds(millis));
    }

    static int subtask(RuntimeContext context) {
        return context.getIndexOfThisSubtask();
    }

    static <T, F extends T> Pattern<T, F> within(Pattern<T, F> pattern, long millis) {
        return pattern.within(Time.milliseconds(millis));
    }
}
