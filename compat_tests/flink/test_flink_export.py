"""Real Flink restores what pyref exports (pyref.flink.export_savepoint, and on Spark
pyref.spark.export_flink).

Per Flink version, one JVM restores (harness.restore_and_dump_many):

* the export case (export_cases.py: the seeds with windows and timers, every keyed kind with
  and without TTL, String / Long / Tuple2 keys, timers of both domains, a value state of every
  type, SPLIT_DISTRIBUTE / UNION / broadcast state) exported at its own parallelism, restored
  at 1 (HashMap backend) and 4 (RocksDB), and exported at 4, restored at 4 (HashMap);
* the seeds bootstrapped with Spark and exported with Spark, restored at 1 and 4;
* the round trip (pyref.flink.import_flink): every corpus case of that version (HashMap
  backend) imported and exported, restored at its own parallelism; the seeds and keyed-kinds
  cases also after a pyref rescale (to 3 and 2), and keyed-kinds after a max-parallelism change
  of its hashed operators (1000 -> 256, on Spark) and after its POJO and TTL states were replaced
  with df.write.format("savepoint") (on Spark); the windows case also into Flink's own
  window operators (WindowsJob.restore: same assigners, functions and state), whose pending
  windows fire after the restore. The default tier does all of it for 2.3.0; for 1.20.3 the
  seeds, keyed-kinds and windows cases with their variants. 1.13.6 also restores 1.14.6's types
  case, exported for it (FROM_NEWER).

Each restore is compared with the expected truth (truth.restore_differences): every value,
key group and subtask; list state as Flink redistributes it; every event-time timer fires
after the restore.

Marked ``flink`` (Java 17 and the Flink jars: cached, or PYREF_FLINK_DOWNLOAD=1), skipped
without them. Flink 1.20.3 and 2.3.0 run in the default tier; the other releases are ``slow``.
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter

import pytest

from compat_tests.flink import harness, jars
from compat_tests.flink.export_cases import (
    at_max_parallelism,
    expected_truth,
    fired_window_differences,
    in_window_operators,
    job_spec,
    without_states,
    write_export_case,
)
from compat_tests.flink.imports import CORPUS, import_options
from compat_tests.flink.imports import truth as corpus_truth
from compat_tests.flink.truth import restore_differences
from pyref import rescale
from pyref.flink import export_savepoint, import_flink
from pyref.testing import SEED_OFFSETS, SEED_TIMERS

pytestmark = pytest.mark.flink

DOWNLOAD = os.environ.get("PYREF_FLINK_DOWNLOAD") == "1"
QUICK_VERSIONS = ("1.20.3", "2.3.0")
VERSIONS = [v if v in QUICK_VERSIONS else pytest.param(v, marks=pytest.mark.slow) for v in jars.FLINK_VERSIONS]
#: (export parallelism, restore parallelism, backend) of the export case.
CASE_RESTORES = [(None, 1, "hashmap"), (None, 4, "rocksdb"), (4, 4, "hashmap")]


def spark_or_none():
    """A local SparkSession when pyspark (with pandas) is installed, else None."""
    try:
        import pandas  # noqa: F401  (mapInArrow needs it)
        from pyspark.sql import SparkSession  # noqa: F401
    except ImportError:
        return None
    from pyref.spark import spark_session

    session = spark_session("local[2]", app_name="pyref-flink-export-tests", **{
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.default.parallelism": "2"})
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="module")
def spark_seeds(tmp_path_factory):
    """The seeds bootstrapped with Spark, as a pyref savepoint (None without pyspark)."""
    spark = spark_or_none()
    if spark is None:
        return None
    from pyref.testing import write_seeds_with_spark

    path = tmp_path_factory.mktemp("spark-seeds") / "seeds"
    write_seeds_with_spark(spark, path)
    return spark, path


#: Rescaled round trips: corpus case -> parallelism.
RESCALED = {"seeds": 3, "keyed-kinds": 2}
#: The corpus cases whose round trips the default tier's versions restore (the slow sweep: every
#: case): 2.3.0 every case, 1.20.3 the two with rescaled and max-parallelism variants and the
#: windows, which keeps the default tier's Flink runs short.
QUICK_TRIPS = {"2.3.0": None, "1.20.3": {"seeds", "keyed-kinds", "windows"}}
#: Round trips from a newer release's corpus case into an older release: 1.14.6's types case restored by
#: 1.13.6, whose RowSerializerSnapshot has no RowKind flag (the exporter writes its Row state's snapshot back).
FROM_NEWER = {"1.13.6": [("1.14.6", "types")]}
#: keyed-kinds' operators keyed by hashable keys (its POJO-keyed one keeps Flink's key groups).
HASHED = ("keyed-kinds", "long-keys", "tuple-keys")


def round_trips(version: str, work, spark) -> list[tuple[str, dict, harness.RestoreRequest]]:
    """The round-trip restores of a version: (name, expected truth, request)."""
    out = []

    def export(source, name: str) -> str:
        target = work / f"{name}-flink"
        export_savepoint(source, target, flink_version=version, inline_bytes=4096)
        return target

    only = QUICK_TRIPS.get(version)
    for newer, name in FROM_NEWER.get(version, ()):
        case = CORPUS / newer / "hashmap" / name
        options = import_options(case)
        truth = without_states(corpus_truth(case), options["skip_states"])
        import_flink(case / "savepoint", work / f"{name}-{newer}-imported", **options)
        out.append((f"round trip {name} of {newer}", truth, harness.RestoreRequest(
            export(work / f"{name}-{newer}-imported", f"{name}-{newer}"), harness.job_spec_from_truth(truth), 1)))
    for case in sorted((CORPUS / version / "hashmap").iterdir()):
        if only is not None and case.name not in only:
            continue
        options = import_options(case)
        truth = without_states(corpus_truth(case), options["skip_states"])
        imported = work / f"{case.name}-imported"
        import_flink(case / "savepoint", imported, **options)
        out.append((f"round trip {case.name}", truth,
                    harness.RestoreRequest(export(imported, case.name), harness.job_spec_from_truth(truth), 1)))
        if case.name == "windows":
            spec, rest = in_window_operators(truth)
            out.append(("round trip windows in Flink's window operators", rest,
                        harness.RestoreRequest(out[-1][2].savepoint_dir, spec, 1)))
        if case.name in RESCALED:
            p = RESCALED[case.name]
            rescale(imported, work / f"{case.name}-p{p}", p)
            spec = harness.job_spec_from_truth(truth, own_parallelism=False)
            out.append((f"round trip {case.name} rescaled to {p}", truth,
                        harness.RestoreRequest(export(work / f"{case.name}-p{p}", f"{case.name}-p{p}"), spec, p)))
        if case.name == "keyed-kinds" and spark is not None:
            from pyref.spark import change_max_parallelism

            changed = work / f"{case.name}-m256"
            change_max_parallelism(spark, imported, changed, {uid: 256 for uid in HASHED}, progress=False)
            moved = at_max_parallelism(truth, {uid: 256 for uid in HASHED})
            out.append((f"round trip {case.name} at max parallelism 256", moved,
                        harness.RestoreRequest(export(changed, f"{case.name}-m256"),
                                               harness.job_spec_from_truth(moved), 1)))
            fixed, expected = replaced_on_spark(spark, case, options, work / f"{case.name}-fixed", truth)
            out.append((f"round trip {case.name} with a POJO and a TTL state replaced on Spark", expected,
                        harness.RestoreRequest(export(fixed, f"{case.name}-fixed"),
                                               harness.job_spec_from_truth(expected), 1)))
    return out


def replaced_on_spark(spark, case, options: dict, target, truth: dict) -> tuple[str, dict]:
    """keyed-kinds imported again, its POJO state (stats: views + 1) and TTL state (ttl-last:
    value + "!", the same TTL timestamps) df.write.format("savepoint") replaced, giving no
    serializer: Flink restores them as its POJO and TTL states, with the new values."""
    from pyspark.sql import functions as F

    import_flink(case / "savepoint", target, **options)

    def replace(state, change):
        df = spark.read.format("savepoint").option("operator", "keyed-kinds").option("state", state).load(str(target))
        (change(df.drop("key_group")).write.format("savepoint").mode("overwrite").option("operator", "keyed-kinds")
         .option("state", state).save(str(target)))

    replace("stats", lambda df: df.withColumn("value", df.value.withField("views", df.value.views + 1)))
    replace("ttl-last", lambda df: df.withColumn("value", F.concat(df.value, F.lit("!"))))
    expected = copy.deepcopy(truth)
    states = expected["operators"]["keyed-kinds"]["keyed_state"]
    for entry in states["stats"]["entries"]:
        entry["value"]["views"] += 1
    for entry in states["ttl-last"]["entries"]:
        entry["value"] += "!"
    return target, expected


@pytest.fixture(scope="module", params=VERSIONS)
def restored(request, tmp_path_factory):
    """Everything a Flink version restored, in one JVM: name -> (expected truth, dump)."""
    version = request.param
    reason = harness.flink_available(version, download=DOWNLOAD)
    if reason:
        pytest.skip(reason)
    spark_seeds = request.getfixturevalue("spark_seeds")  # Spark only where Flink can run
    work = tmp_path_factory.mktemp(f"export-{version}")
    write_export_case(work / "case")
    requests, truths, names = [], [], []
    exported = {}
    for export_p, restore_p, backend in CASE_RESTORES:
        if export_p not in exported:
            target = work / f"case-flink-p{export_p or 'own'}"
            export_savepoint(work / "case", target, flink_version=version, parallelism=export_p, inline_bytes=4096)
            exported[export_p] = (target, expected_truth(work / "case", export_p))
        target, truth = exported[export_p]
        requests.append(harness.RestoreRequest(target, job_spec(truth), restore_p, backend))
        truths.append(truth)
        names.append(f"case exported at {export_p or 'its own parallelism'}, restored at {restore_p} ({backend})")
    if spark_seeds is not None:
        from pyref.spark import export_flink

        spark, seeds = spark_seeds
        target = work / "spark-seeds-flink"
        export_flink(spark, seeds, target, flink_version=version, inline_bytes=0, progress=False)
        truth = expected_truth(seeds)
        for p in (1, 4):
            requests.append(harness.RestoreRequest(target, job_spec(truth), p))
            truths.append(truth)
            names.append(f"Spark seeds restored at {p}")
    for name, truth, request in round_trips(version, work, spark_seeds[0] if spark_seeds else None):
        names.append(name)
        truths.append(truth)
        requests.append(request)
    dumps = harness.restore_and_dump_many(version, requests, download=DOWNLOAD)
    return dict(zip(names, zip(truths, dumps)))


def test_every_export_restores_as_written(restored):
    problems = {name: restore_differences(truth, dump) for name, (truth, dump) in restored.items()}
    assert not any(problems.values()), json.dumps(problems, indent=1, ensure_ascii=False)


def test_the_corpus_round_trip_restores_the_same_values(restored):
    """Flink savepoint -> import -> (rescale, max-parallelism change) -> export -> Flink: the values
    the corpus's truth says the original held, where they belong."""
    trips = {name: entry for name, entry in restored.items() if name.startswith("round trip")}
    assert {"round trip seeds", "round trip keyed-kinds", "round trip seeds rescaled to 3",
            "round trip keyed-kinds rescaled to 2"} <= set(trips)
    if "Spark seeds restored at 1" in restored:  # pyspark is here: the max-parallelism change ran too
        assert "round trip keyed-kinds at max parallelism 256" in trips
        assert "round trip keyed-kinds with a POJO and a TTL state replaced on Spark" in trips
    problems = {name: restore_differences(truth, dump) for name, (truth, dump) in trips.items()}
    assert not any(problems.values()), json.dumps(problems, indent=1, ensure_ascii=False)


def test_windows_fire_in_flinks_window_operators_after_the_round_trip(restored, request):
    """The corpus's windows case imported and exported, restored into Flink's own window operators
    (tumbling reduce, sliding aggregate with allowed lateness, tumbling process function): at the end
    of input every pending window fires once, with the result its restored contents give."""
    version = request.node.callspec.params["restored"]
    truth_of_case = corpus_truth(CORPUS / version / "hashmap" / "windows")
    _, dump = restored["round trip windows in Flink's window operators"]
    problems = fired_window_differences(truth_of_case, dump)
    assert not problems, problems


@pytest.mark.parametrize("source", ["case", "Spark seeds"])
@pytest.mark.parametrize("parallelism", [1, 4])
def test_seeds_restore_every_offset_once(restored, source, parallelism):
    """The seeds at parallelism 1 and 4, bootstrapped with pyref and with Spark: Flink hands out
    every offset once (at 4, one per subtask: none idle) and every URL count to its key group's
    subtask."""
    backend = "hashmap" if parallelism == 1 else "rocksdb"
    name = (f"case exported at its own parallelism, restored at {parallelism} ({backend})" if source == "case"
            else f"Spark seeds restored at {parallelism}")
    if name not in restored:
        pytest.skip("pyspark (with pandas) is not installed")
    _, dump = restored[name]
    offsets = dump["operators"]["kafka-source"]["operator_state"]["offsets"]["subtasks"]
    assert len(offsets) == parallelism
    assert Counter(o for sub in offsets for o in sub) == Counter(o for part in SEED_OFFSETS for o in part)
    if parallelism == 4:
        assert all(len(sub) == 1 for sub in offsets)
    counts = dump["operators"]["url-counter"]["keyed_state"]["count"]["entries"]
    assert {e["subtask"] for e in counts} == set(range(parallelism)) and len(counts) == 50


def test_an_export_at_4_is_restored_as_pyref_cut_it(restored):
    truth, dump = restored["case exported at 4, restored at 4 (hashmap)"]
    offsets = dump["operators"]["kafka-source"]["operator_state"]["offsets"]["subtasks"]
    assert offsets == truth["operators"]["kafka-source"]["operator_state"]["offsets"]["subtasks"] == [
        [100], [101], [200], [201]]
    names = dump["operators"]["list-states"]["operator_state"]["names"]["subtasks"]
    assert names == truth["operators"]["list-states"]["operator_state"]["names"]["subtasks"]


def test_windows_and_timers_fire_after_the_restore(restored):
    for name, (truth, dump) in restored.items():
        if name.startswith("round trip"):
            continue  # compared with the corpus's truth, fired timers included
        windows = dump["operators"]["window-counter"]
        assert sorted((t["key"], t["timestamp"]) for t in windows["fired_timers"]) == sorted(
            (url, t) for url, _, t in SEED_TIMERS), name
        if "keyed-kinds" in dump["operators"]:
            kinds = dump["operators"]["keyed-kinds"]
            assert {t["domain"] for t in kinds["timers"]} == {"event_time", "processing_time"}
            assert len(kinds["fired_timers"]) == 10 and {t["domain"] for t in kinds["fired_timers"]} == {"event_time"}
