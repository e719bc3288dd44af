package org.pyref.flink;

/** The corpus jobs by name. */
final class Jobs {
    private Jobs() {}

    static void build(String name, JobBuilder b) {
        switch (name) {
            case "seeds": SeedsJob.build(b); break;
            default: throw new IllegalArgumentException("unknown corpus job " + name);
        }
    }
}
