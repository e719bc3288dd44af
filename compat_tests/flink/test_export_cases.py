"""The export case (export_cases.py) without a JVM: what pyref's own Flink reader reads
from every export is what the case holds, by the same comparison as a real Flink restore
(truth.restore_differences); and the expected truth itself is what the case was written
with. test_flink_export.py restores the same exports in real Flink."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from compat_tests.flink.export_cases import (
    KEYS,
    TTL_STAMP,
    TYPES,
    expected_truth,
    job_spec,
    reader_dump,
    write_export_case,
)
from compat_tests.flink.truth import restore_differences
from pyref.flink import FlinkSavepoint, export_savepoint
from pyref.testing import SEED_COUNTS, SEED_OFFSETS, SEED_TIMERS


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    path = tmp_path_factory.mktemp("export-case") / "sp"
    write_export_case(path)
    return path


@pytest.mark.parametrize("parallelism, version, inline_bytes", [(None, "2.3", 20480), (1, "1.20", 0), (4, "2.0", 512),
                                                                 (3, "2.1", 20480)])
def test_every_state_reads_back_as_written(case, tmp_path, parallelism, version, inline_bytes):
    target = tmp_path / "flink"
    export_savepoint(case, target, flink_version=version, parallelism=parallelism, inline_bytes=inline_bytes)
    truth = expected_truth(case, parallelism)
    problems = restore_differences(truth, reader_dump(target, truth))
    assert problems == [], json.dumps(problems, indent=1, ensure_ascii=False)


def test_union_state_is_stored_once(case, tmp_path):
    """Every subtask restores a UNION state whole, so each element is written to one handle only."""
    export_savepoint(case, tmp_path / "flink", flink_version="2.3", parallelism=2)
    with FlinkSavepoint.open(tmp_path / "flink", uids=["list-states"]) as sp:
        view = sp.operator("list-states").list_state("union-offsets")
        stored = [v for i in range(2) for v in view.partition(i)]
    assert Counter(stored) == Counter(1000 * subtask + i for subtask in range(3) for i in range(subtask + 1))


def test_the_expected_truth_is_what_the_case_holds(case):
    """The truth the restores are checked against, checked against the constants the case was
    written from (so a reader and an exporter that agree on a mistake would still fail)."""
    ops = expected_truth(case)["operators"]
    assert ops["kafka-source"]["operator_state"]["offsets"]["subtasks"] == [list(o) for o in SEED_OFFSETS]
    assert {e["key"]: e["value"] for e in ops["url-counter"]["keyed_state"]["count"]["entries"]} == SEED_COUNTS
    assert sorted((t["key"], t["timestamp"]) for t in ops["window-counter"]["timers"]) == sorted(
        (url, t) for url, _, t in SEED_TIMERS)
    kinds = ops["keyed-kinds"]["keyed_state"]
    assert {e["key"] for e in kinds["count"]["entries"]} == set(KEYS)
    assert {e["ttl_timestamp"] for e in kinds["ttl-last"]["entries"]} == {TTL_STAMP + i for i in range(len(KEYS))}
    assert all(e["value"] for e in kinds["history"]["entries"]) and len(kinds["history"]["entries"]) < len(KEYS)
    assert [None] in [[v for _, v in e["value"] if v is None] for e in kinds["buckets"]["entries"]]
    assert kinds["sum"]["function"] == "sum" and kinds["count-sum"]["type"] == "Tuple2<Long,Long>"
    assert {name: s["type"] for name, s in ops["types"]["keyed_state"].items()}["string-map"] == "Map<String,Long>"
    assert set(ops["types"]["keyed_state"]) == set(TYPES)
    assert {(t["domain"], t["namespace"]) for t in ops["keyed-kinds"]["timers"]} == {("event_time", None),
                                                                                     ("processing_time", None)}


def test_the_restore_job_declares_every_state(case):
    spec = {o["uid"]: o for o in job_spec(expected_truth(case))["operators"]}
    assert spec["keyed-kinds"]["keyed_state"]["ttl-tags"] == {
        "kind": "map", "type": "String", "user_key_type": "Integer", "namespace": "void",
        "ttl": {"ttl_ms": 30 * 24 * 3600 * 1000, "update_type": "OnCreateAndWrite", "visibility": "NeverReturnExpired"}}
    assert spec["list-states"]["operator_state"]["op-broadcast"] == {"mode": "BROADCAST", "type": "Long",
                                                                    "key_type": "String"}
    assert spec["window-counter"]["timer_services"] == {"window-timers": {"namespace": "window"}}
    assert "parallelism" not in spec["url-counter"]  # every operator runs at the restore's parallelism
