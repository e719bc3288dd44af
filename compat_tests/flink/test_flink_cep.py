"""Flink CEP state through pyref: the CEP job (jobs/CepJob.java: a followedBy pattern within a
time bound and a oneOrMore().consecutive() pattern skipping past its last event, in event time)
stopped with a canonical savepoint while runs of both are partial and events wait for the
watermark; pyref inspects, verifies, imports (and rescales) it and exports it back to Flink.
The export restores into the same CEP job, whose matches after the restore, added to the
ones before, must be each pattern over all of the input (so the NFA states, the shared buffer
and the queued events and their timers came back).

Marked ``flink`` (Java 17 and the Flink jars with flink-cep: cached, or PYREF_FLINK_DOWNLOAD=1).
One JVM per Flink version runs the first phase, another the restores.
"""

from __future__ import annotations

import os

import pytest

from compat_tests.flink import harness
from compat_tests.flink.cep import OPERATORS, STATE_TYPES
from compat_tests.flink.sql import added_up, keyed_contents, state_types
from pyref.cli import main as pyref_cli
from pyref.flink import FlinkSavepoint
from pyref.flink.cep import NFAState

pytestmark = pytest.mark.flink

DOWNLOAD = os.environ.get("PYREF_FLINK_DOWNLOAD") == "1"
#: The parallelism a rescaled export is restored at (the job ran at harness.CepRun's 2).
RESCALED = 3
#: (version, backends): both backends on the newest release, one on the 1.x line.
CASES = {"2.3.0": ("hashmap", "rocksdb"), "1.20.3": ("rocksdb",)}


@pytest.fixture(scope="module", params=sorted(CASES))
def cep_runs(request, tmp_path_factory):
    """Per backend: the Flink savepoint, its run's result, pyref's export of its import and
    the restored run's result; the first backend's import also rescaled 2 -> 3 by pyref."""
    version = request.param
    reason = harness.flink_available(version, download=DOWNLOAD)
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp(f"cep-{version}")
    runs = harness.phased_round_trips(version, "cep", root, CASES[version], rescaled=RESCALED, download=DOWNLOAD)
    return version, runs


def test_inspect_shows_the_types_of_cep_state(cep_runs):
    _, runs = cep_runs
    for run in runs.values():
        types = state_types(run["savepoint"])
        assert sorted(set(types)) == STATE_TYPES and len(types) == OPERATORS * len(STATE_TYPES)
        assert pyref_cli(["verify", str(run["savepoint"])]) == 0


def test_views_decode_pending_matches_and_buffered_events(cep_runs):
    """Partial matches wait in the NFA with their events in the shared buffer; later events
    wait in the queue for the watermark, each with its timer."""
    _, runs = cep_runs
    for run in runs.values():
        with FlinkSavepoint.open(run["savepoint"]) as savepoint:
            for op in (op for op in savepoint.operators if op.keyed_state_names):
                nfa = dict(op.keyed_state("nfaStateName").items())
                assert all(isinstance(state, NFAState) for state in nfa.values())
                starts = {m.start_event for state in nfa.values() for m in state.partial_matches if m.start_event}
                events = {(key, event_id): lockable for key, event_id, lockable
                          in op.keyed_state("sharedBuffer-events").items()}
                assert starts and starts <= {event_id for _, event_id in events}
                assert all(lockable.ref_count > 0 and lockable.element["key"] == key
                           for (key, _), lockable in events.items())
                queued = list(op.keyed_state("eventQueuesStateName").items())
                timers = {t["timestamp"] for t in op.timers("watermark-callbacks", "event-time").to_arrow().to_pylist()}
                assert queued and {ts for _, ts, _ in queued} <= timers


def test_the_export_holds_exactly_the_savepoints_state(cep_runs):
    """Every key, key group, user key, value and timer as Flink wrote it."""
    _, runs = cep_runs
    for run in runs.values():
        original = keyed_contents(run["savepoint"])
        assert any(rows for name, rows in original.items() if name.endswith("/nfaStateName"))
        assert keyed_contents(run["export"]) == original


def test_flink_cep_restores_the_export_and_continues(cep_runs):
    _, runs = cep_runs
    for backend, run in runs.items():
        assert run["first"]["changelog"] == run["first"]["expected"], backend
        restored = run["restored"]
        assert added_up(run["first"]["changelog"], restored["changelog"]) == restored["expected"], backend


def test_flink_cep_restores_an_export_rescaled_by_pyref(cep_runs):
    """Rescaled 2 -> 3 by pyref (key groups with their partial matches, buffered events and
    timers move): the job at parallelism 3 matches as if nothing moved."""
    _, runs = cep_runs
    run = next(r for r in runs.values() if "restored-3" in r)
    restored = run["restored-3"]
    assert added_up(run["first"]["changelog"], restored["changelog"]) == restored["expected"]
