package org.pyref.flink;

/** The corpus jobs by name. */
final class Jobs {
    private Jobs() {}

    static void build(String name, JobBuilder b) {
        if (name.startsWith("bulk-")) {
            BulkJob.build(b, Integer.parseInt(name.substring(5)));
            return;
        }
        switch (name) {
            case "seeds": SeedsJob.build(b); break;
            case "operator-state": OperatorStateJob.build(b); break;
            case "keyed-kinds": KeyedKindsJob.build(b); break;
            case "heap-kinds": HeapKindsJob.build(b); break;
            case "windows": WindowsJob.build(b); break;
            case "sessions": SessionsJob.build(b); break;
            case "types": TypesJob.build(b); break;
            case "churn": ChurnJob.build(b); break;
            case "scala": ScalaJob.build(b); break;
            case "churn-rescaled-1": ChurnJob.buildRescaled(b, 1); break;
            case "churn-rescaled-3": ChurnJob.buildRescaled(b, 3); break;
            case "backpressure": BackpressureJob.build(b); break;
            case "async-state": AsyncStateJob.build(b); break;
            default: throw new IllegalArgumentException("unknown corpus job " + name);
        }
    }
}
