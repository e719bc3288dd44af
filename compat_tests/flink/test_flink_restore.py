"""Real Flink restores the corpus savepoints to exactly their truth.json.

Marked ``flink``: they need Java 17 and the Flink jars in the cache (``python -m
compat_tests.flink.jars``, or ``PYREF_FLINK_DOWNLOAD=1`` to let the tests fetch them), and skip
cleanly without. The sweep over every case of every version is also ``slow``.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from compat_tests.flink import harness, jars
from compat_tests.flink.generate import CORPUS
from compat_tests.flink.truth import restore_differences

pytestmark = pytest.mark.flink

DOWNLOAD = os.environ.get("PYREF_FLINK_DOWNLOAD") == "1"
#: The version of the quick (not slow) tests: the newest.
QUICK_VERSION = jars.FLINK_VERSIONS[-1]


def corpus_cases(version: str) -> list:
    return sorted(p.parent for p in (CORPUS / version).glob("*/*/truth.json"))


def truth_of(case) -> dict:
    return json.loads((case / "truth.json").read_text(encoding="utf-8"))


def require_flink(version: str) -> None:
    reason = harness.flink_available(version, download=DOWNLOAD)
    if reason:
        pytest.skip(reason)


def restore_cases(version: str, cases: list) -> dict[str, list[str]]:
    """Each case restored at its own parallelism, all in one JVM: case -> differences from its truth."""
    truths = [truth_of(c) for c in cases]
    requests = [harness.RestoreRequest(c / "savepoint", harness.job_spec_from_truth(t), 1) for c, t in zip(cases, truths)]
    dumps = harness.restore_and_dump_many(version, requests, download=DOWNLOAD)
    return {c.relative_to(CORPUS).as_posix(): restore_differences(t, d) for c, t, d in zip(cases, truths, dumps)}


@pytest.mark.slow
@pytest.mark.parametrize("version", jars.FLINK_VERSIONS)
def test_every_case_restores_to_its_truth(version):
    cases = corpus_cases(version)
    if not cases:
        pytest.skip(f"no corpus cases for Flink {version}")
    require_flink(version)
    problems = {case: p for case, p in restore_cases(version, cases).items() if p}
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=False)


@pytest.fixture(scope="module")
def quick_restores():
    """One JVM for the quick tests: three cases at their own parallelism, the seeds at 1 and 4."""
    require_flink(QUICK_VERSION)
    names = ["hashmap/seeds", "rocksdb/keyed-kinds", "rocksdb/windows"]
    cases = [CORPUS / QUICK_VERSION / n for n in names]
    if not all(c.exists() for c in cases):
        pytest.skip(f"the corpus lacks {names} for Flink {QUICK_VERSION}")
    truths = [truth_of(c) for c in cases]
    requests = [harness.RestoreRequest(c / "savepoint", harness.job_spec_from_truth(t), 1) for c, t in zip(cases, truths)]
    seeds_spec = harness.job_spec_from_truth(truths[0], own_parallelism=False)
    requests += [harness.RestoreRequest(cases[0] / "savepoint", seeds_spec, p) for p in (1, 4)]
    dumps = harness.restore_and_dump_many(QUICK_VERSION, requests, download=DOWNLOAD)
    return dict(zip(names, zip(truths, dumps))), truths[0], dict(zip((1, 4), dumps[3:]))


def test_cases_restore_to_their_truth(quick_restores):
    restored, _, _ = quick_restores
    problems = {name: restore_differences(truth, dump) for name, (truth, dump) in restored.items()}
    assert not any(problems.values()), json.dumps(problems, indent=1, ensure_ascii=False)


def test_windows_and_timers_fire_after_the_restore(quick_restores):
    restored, _, _ = quick_restores
    truth, dump = restored["rocksdb/windows"]
    for uid in ("tumbling-reduce", "sliding-aggregate", "tumbling-process"):
        fired = dump["operators"][uid]["fired_timers"]
        windows = {json.dumps(e["namespace"]) for e in truth["operators"][uid]["keyed_state"]["window-contents"]["entries"]}
        assert fired and {json.dumps(t["namespace"]) for t in fired} == windows, uid
    truth, dump = restored["rocksdb/keyed-kinds"]
    kinds = dump["operators"]["keyed-kinds"]
    assert {t["domain"] for t in kinds["timers"]} == {"event_time", "processing_time"}
    assert len(kinds["fired_timers"]) == len([t for t in truth["operators"]["keyed-kinds"]["timers"]
                                              if t["domain"] == "event_time"]) > 0


@pytest.mark.parametrize("parallelism", [1, 4])
def test_seeds_restore_at_another_parallelism(quick_restores, parallelism):
    """Flink re-cuts the seeds' offsets (every offset once; at 4 no subtask idle) and hands each
    URL count to the subtask of its key group."""
    _, truth, by_parallelism = quick_restores
    dump = by_parallelism[parallelism]
    offsets = dump["operators"]["kafka-source"]["operator_state"]["offsets"]["subtasks"]
    assert len(offsets) == parallelism
    assert Counter(o for sub in offsets for o in sub) == Counter([100, 101, 200, 201])
    if parallelism == 4:
        assert all(len(sub) == 1 for sub in offsets)
    assert restore_differences(truth, dump) == []
    counts = dump["operators"]["url-counter"]["keyed_state"]["count"]["entries"]
    assert {e["key"]: e["value"] for e in counts} == {f"/page/{i}": i for i in range(50)}
    assert {e["subtask"] for e in counts} == set(range(parallelism))
