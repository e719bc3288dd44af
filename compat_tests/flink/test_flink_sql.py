"""Flink SQL state through pyref: the SQL job (jobs/SqlJob.java: group aggregates (one with
COUNT(DISTINCT), TIMESTAMP and DECIMAL accumulators), TUMBLE and HOP window aggregates and a
legacy GROUP BY TUMBLE with windows pending at the savepoint, a join under STATE_TTL, an
interval join, deduplication (also of rows with ARRAY and MAP columns), Top-N (also over an
updating input: a SortedMap), COLLECT, ARRAY_AGG, MAX over an updating input, an OVER
aggregation and a MATCH_RECOGNIZE with partial matches pending) stopped with a canonical
savepoint, which pyref inspects, verifies, imports (and rescales) and exports back to Flink;
the export restores into the same SQL job, whose changelog after the restore, added to the one
before, must be each query over all of the input (so every aggregate, pending window, join side
and partial match came back).

Marked ``flink`` (Java 17 and the Flink jars with their table jars: cached, or
PYREF_FLINK_DOWNLOAD=1). One JVM per Flink version runs the jobs, another the restores.
"""

from __future__ import annotations

import os

import pytest

from compat_tests.flink import harness
from compat_tests.flink.sql import TTL_DEFAULT, added_up, expected_state_types, keyed_contents, state_types
from pyref.cli import main as pyref_cli
from pyref.flink import FlinkSavepoint

pytestmark = pytest.mark.flink

DOWNLOAD = os.environ.get("PYREF_FLINK_DOWNLOAD") == "1"
#: The parallelism a rescaled export is restored at (the job ran at harness.SqlRun's 2).
RESCALED = 3
#: (version, backends): both backends on the newest release, one on the 1.x line.
CASES = {"2.3.0": ("hashmap", "rocksdb"), "1.20.3": ("rocksdb",)}


@pytest.fixture(scope="module", params=sorted(CASES))
def sql_runs(request, tmp_path_factory):
    """Per backend: the Flink savepoint, its run's result, pyref's export of its import and
    the restored run's result."""
    version = request.param
    reason = harness.flink_available(version, download=DOWNLOAD)
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp(f"sql-{version}")
    # The first backend's import is also rescaled by pyref (2 -> 3 subtasks: key groups and source
    # splits move); an operator the planner pins to one subtask (the global Top-N) stays at 1.
    runs = harness.phased_round_trips(version, "sql", root, CASES[version], rescaled=RESCALED,
                                      import_options={"ttl_default": TTL_DEFAULT}, download=DOWNLOAD)
    return version, runs


def test_inspect_shows_the_row_types_of_sql_state(sql_runs):
    version, runs = sql_runs
    for run in runs.values():
        assert state_types(run["savepoint"]) == expected_state_types(version)
        assert pyref_cli(["verify", str(run["savepoint"])]) == 0


def test_the_export_holds_exactly_the_savepoints_state(sql_runs):
    """Every key (BinaryRowData bytes), key group, namespace, value and timer as Flink wrote it."""
    _, runs = sql_runs
    for run in runs.values():
        original = keyed_contents(run["savepoint"])
        assert any(original[name] for name in original if name.endswith("/window-timers"))  # windows were pending
        assert any(original[name] for name in original if name.endswith("/eventQueuesStateName"))  # and CEP rows
        assert keyed_contents(run["export"]) == original


def test_flink_sql_restores_the_export_and_continues(sql_runs):
    _, runs = sql_runs
    for backend, run in runs.items():
        assert run["first"]["changelog"] == run["first"]["expected"], backend
        restored = run["restored"]
        assert added_up(run["first"]["changelog"], restored["changelog"]) == restored["expected"], backend


def test_flink_sql_restores_an_export_rescaled_by_pyref(sql_runs):
    """Rescaled 2 -> 3 by pyref (every key group with the subtask Flink's rule gives it at 3,
    the source's splits spread): the job at parallelism 3 continues as if nothing moved."""
    _, runs = sql_runs
    run = next(r for r in runs.values() if "restored-3" in r)
    restored = run["restored-3"]
    assert added_up(run["first"]["changelog"], restored["changelog"]) == restored["expected"]
