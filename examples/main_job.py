"""The main job: the seeds' scenario, bootstrapped with Spark, restored at parallelism 1 and 4,
by pyref and, exported to Flink, by a real Flink job.

A Kafka source holds the offsets of 4 partitions at parallelism 2 (SPLIT_DISTRIBUTE
list state), a counter holds a count per URL (keyed state) at parallelism 2, and
(format 1.2) a window counter holds the hits per URL in tumbling one-minute windows
(keyed state under time-window namespaces) with the event-time timer pending for each
URL's open window. The job bootstraps that savepoint with Spark, verifies it with the
core, rescales it to parallelism 1 and 4 (shallow: no state bytes copied), prints who
holds what per subtask, reads the result back with Spark and verifies everything again.
Last, it exports the bootstrapped savepoint as a canonical Flink savepoint (on Spark),
starts a real Flink job from it on Flink's local mini cluster at parallelism 1 and 4
and prints who holds what as Flink sees it (Java 17 needed; Flink's jars are fetched
from PyPI on first use and cached, see compat_tests/flink/jars.py).

    python examples/main_job.py [--out DIR] [--master URL] [--no-spark] [--no-flink]
                                [--flink-version V]

Exits 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyref import Savepoint, rescale
from pyref.flink import export_savepoint
from pyref.inspection import verify
from pyref.testing import SEED_COUNTS, SEED_OFFSETS, SEED_TIMERS, SEED_WINDOW_COUNTS, write_seeds, write_seeds_with_spark

OFFSETS = dict(enumerate(SEED_OFFSETS))  # Kafka partition offsets held by source subtasks 0 and 1
COUNTS = SEED_COUNTS  # hits per URL
WINDOW_COUNTS = SEED_WINDOW_COUNTS  # hits per (URL, one-minute window)
TIMERS = SEED_TIMERS  # the event-time timer pending for each URL's open window


def bootstrap_with_core(path: Path) -> None:
    write_seeds(path, overwrite=True, windowed=True)


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def __call__(self, ok: bool, what: str) -> None:
        print(f"  [{'ok' if ok else 'FAILED'}] {what}")
        if not ok:
            self.failed.append(what)


def verified(path: Path, check: Checks) -> Savepoint:
    sp = Savepoint.open(path)
    report = verify(sp)
    check(report.ok, f"verify {path.name}: {report.chunks} chunks, {report.values} values, every checksum")
    return sp


def show_subtasks(sp: Savepoint, parallelism: int, check: Checks) -> None:
    """Who holds what when the savepoint is restored at its parallelism."""
    plan = sp.restore_plan(parallelism)
    view = sp.operator("url-counter").keyed_state("count")
    offsets, urls = [], []
    for i in range(parallelism):
        source, counter = plan.subtask("kafka-source", i), plan.subtask("url-counter", i)
        held = list(source.list_state("offsets"))
        counts = dict(counter.keyed_state("count"))
        groups = counter.key_group_range
        print(f"  subtask {i}: offsets {held}; {len(counts)} URL counts in key groups {groups.first}..{groups.last}")
        offsets += held
        urls += list(counts)
        check(all(view.key_group_of(url) in groups for url in counts), f"subtask {i} holds only keys of its key groups")
    check(sorted(offsets) == [o for values in OFFSETS.values() for o in values], "every offset restored exactly once")
    check(sorted(urls) == sorted(COUNTS), "every URL count restored exactly once")
    show_windows(sp, plan, parallelism, check)
    if parallelism == 4:
        check(all(len(list(plan.subtask("kafka-source", i).list_state("offsets"))) == 1 for i in range(4)),
              "at parallelism 4 each source subtask reads one partition (none idle)")


def show_windows(sp: Savepoint, plan, parallelism: int, check: Checks) -> None:
    """The window counter: each subtask restores the windowed counts and the pending timers of its keys."""
    view = sp.operator("window-counter").keyed_state("count")
    windowed, timers = {}, []
    for i in range(parallelism):
        sub = plan.subtask("window-counter", i)
        counts = {(url, window): hits for url, window, hits in sub.keyed_state("count")}
        pending = list(sub.timers("window-timers"))
        groups = sub.key_group_range
        print(f"  subtask {i}: {len(counts)} windowed counts of {len({u for u, _ in counts})} URLs, "
              f"{len(pending)} pending timers (first: {pending[0] if pending else None})")
        check(all(view.key_group_of(url) in groups for url, _, _ in pending),
              f"subtask {i} holds the timers of its own keys only")
        windowed.update(counts)
        timers += pending
    check(windowed == WINDOW_COUNTS, "every windowed count restored exactly once, under its window")
    check(sorted(timers) == sorted(TIMERS), "every pending timer restored exactly once, with its key")


def read_back_with_spark(spark, path: Path, check: Checks) -> None:
    def state(operator: str, name: str):
        return spark.read.format("savepoint").option("operator", operator).option("state", name).load(str(path))

    spark.read.format("savepoint-metadata").load(str(path)).select(
        "operator_id", "parallelism", "max_parallelism", "state", "kind", "mode", "serializer", "entries",
        "chunks").show(truncate=False)
    offsets = state("kafka-source", "offsets")
    offsets.orderBy("subtask", "index").show()
    counts = state("url-counter", "count")
    counts.orderBy("key_group").show(5)
    check({(r.subtask, r.value) for r in offsets.collect()} == {(0, 100), (1, 101), (2, 200), (3, 201)},
          "Spark reads one offset per subtask at parallelism 4")
    check({r.key: r.value for r in counts.collect()} == COUNTS, "Spark reads every URL count")
    windowed = state("window-counter", "count")
    windowed.orderBy("key", "namespace").show(3, truncate=False)
    check({(r.key, (r.namespace.start, r.namespace.end)): r.value for r in windowed.collect()}
          == {(url, (w.start, w.end)): hits for (url, w), hits in WINDOW_COUNTS.items()},
          "Spark reads every windowed count with its window")
    timers = (spark.read.format("savepoint").option("operator", "window-counter").option("timer_service", "window-timers")
              .option("target_parallelism", 4).load(str(path)))
    timers.orderBy("subtask", "key").show(3, truncate=False)
    check(sorted((r.key, r.timestamp) for r in timers.collect()) == sorted((url, t) for url, _, t in TIMERS),
          "Spark reads every pending timer")


def restore_in_flink(seeds: Path, out: Path, version: str, spark, check: Checks) -> None:
    """Export the seeds to Flink and let a real Flink job restore them at 1 and 4."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the Flink harness lives in compat_tests/
    from compat_tests.flink import harness
    from compat_tests.flink.export_cases import expected_truth, job_spec
    from compat_tests.flink.truth import restore_differences

    target = out / "seeds-flink"
    if spark is not None:
        from pyref.spark import export_flink

        result = export_flink(spark, seeds, target, flink_version=version, overwrite=True, progress=False)
    else:
        result = export_savepoint(seeds, target, flink_version=version, overwrite=True)
    print(f"exported {seeds.name} for Flink {version}: {target} (_metadata version {result.metadata_version}, "
          f"{result.state_files} state files, {result.inline_handles} inline handles)")
    truth = expected_truth(seeds)
    print(f"starting Flink {version} jobs from {target.name} at parallelism 1 and 4 (local mini cluster)")
    dumps = harness.restore_and_dump_many(
        version, [harness.RestoreRequest(target, job_spec(truth), p) for p in (1, 4)], download=True)
    for parallelism, dump in zip((1, 4), dumps):
        print(f"  Flink at parallelism {parallelism}:")
        ops = dump["operators"]
        offsets = ops["kafka-source"]["operator_state"]["offsets"]["subtasks"]
        for i in range(parallelism):
            counts = [e for e in ops["url-counter"]["keyed_state"]["count"]["entries"] if e["subtask"] == i]
            windows = [e for e in ops["window-counter"]["keyed_state"]["count"]["entries"] if e["subtask"] == i]
            fired = [t for t in ops["window-counter"]["fired_timers"] if t["subtask"] == i]
            groups = sorted(e["key_group"] for e in counts)
            print(f"    subtask {i}: offsets {offsets[i]}; {len(counts)} URL counts in key groups "
                  f"{groups[0]}..{groups[-1]}; {len(windows)} windowed counts; {len(fired)} timers fired")
        check(restore_differences(truth, dump) == [], f"Flink at {parallelism} read exactly what was exported")
        check(sorted(o for sub in offsets for o in sub) == sorted(o for v in OFFSETS.values() for o in v),
              "Flink restored every offset exactly once")
        if parallelism == 4:
            check(all(len(sub) == 1 for sub in offsets), "at parallelism 4 each Flink source subtask reads one "
                                                         "partition (none idle)")
        check(sorted((t["key"], t["timestamp"]) for t in ops["window-counter"]["fired_timers"])
              == sorted((url, t) for url, _, t in TIMERS), "every pending timer fired in Flink after the restore")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="./out", help="directory for the savepoints (default ./out)")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    parser.add_argument("--no-spark", action="store_true", help="bootstrap and read with the core only")
    parser.add_argument("--no-flink", action="store_true", help="skip the restore in real Flink (no Java needed)")
    parser.add_argument("--flink-version", default="2.3.0", help="the Flink release that restores it (default 2.3.0)")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    check = Checks()
    spark, owned = None, False
    if not args.no_spark:
        from pyspark.sql import SparkSession

        from pyref.spark import spark_session

        owned = SparkSession.getActiveSession() is None  # a session someone else started stays up
        spark = spark_session(args.master, app_name="pyref main job", **{"spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
    try:
        seeds = out / "seeds"
        print(f"bootstrapping {seeds} with {'Spark ' + args.master if spark else 'the core'}")
        write_seeds_with_spark(spark, seeds) if spark else bootstrap_with_core(seeds)
        verified(seeds, check)
        show_subtasks(Savepoint.open(seeds), 2, check)
        for parallelism in (1, 4):
            target = out / f"seeds-p{parallelism}"
            new_bytes = rescale(seeds, target, parallelism, overwrite=True).info.data_bytes
            print(f"rescaled to parallelism {parallelism}: {target} ({new_bytes} bytes of state copied)")
            check(new_bytes == 0, "rescaling copied no state bytes")
            show_subtasks(verified(target, check), parallelism, check)
        if spark is not None:
            print(f"reading {out / 'seeds-p4'} back with Spark")
            read_back_with_spark(spark, out / "seeds-p4", check)
        if not args.no_flink:
            restore_in_flink(seeds, out, args.flink_version, spark, check)
    finally:
        if owned:
            spark.stop()
    if check.failed:
        print(f"FAILED: {len(check.failed)} checks: {check.failed}", file=sys.stderr)
        return 1
    print("OK: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
