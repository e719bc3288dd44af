package org.pyref.flink;

/** Flink 2.0 removed the Scala API: the scala corpus job (compat/scala/1.13) is refused. */
final class ScalaJob {
    private ScalaJob() {}

    static void build(JobBuilder b) {
        throw new UnsupportedOperationException("the scala job needs Flink 1.x (2.0 removed the Scala API)");
    }
}
