"""Fragments of the format 1.2 parts, without Spark: namespace and TTL columns, timers
(whole key groups per fragment, each timer once), broadcast maps (whole maps per fragment)."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from pyref import CorruptSavepointError, Savepoint, SavepointWriter
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.restore import plan_list_state
from pyref.serializers import Int64, String, TimeWindow, Window
from pyref.spark.fragments import StateScan, chunk_fragments, fragment_batches, keyed_batches, list_fragments
from pyref.timers import find_timer_service
from pyref.ttl import TtlConfig

W = [Window(i * 10, (i + 1) * 10) for i in range(4)]


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    path = tmp_path_factory.mktemp("f12") / "sp"
    keys = [f"k{i}" for i in range(200)]
    with SavepointWriter(str(path), chunk_bytes=256, inline_bytes=0) as w:
        op = w.add_operator("op", 3, max_parallelism=16, key_serializer=String())
        op.keyed_state("count", Int64(), namespace_serializer=TimeWindow(), ttl=TtlConfig(100)).add(
            keys * 2, list(range(400)), namespaces=[W[0]] * 200 + [W[1]] * 200, ttl_timestamps=list(range(400)))
        timers = op.timer_service("t", "event_time", TimeWindow())
        timers.add(keys, [9] * 200, [W[0]] * 200)
        timers.add(keys[:50], [9] * 50, [W[0]] * 50)  # stored twice, in later chunks of the same key groups
        op.broadcast_state("rules", String(), Int64()).add_all([f"r{i}" for i in range(40)], list(range(40)))
    return Savepoint.open(path)


def test_namespace_and_ttl_columns(windowed):
    scan = StateScan.plan(windowed.location, "op", "count")
    assert scan.schema.names == ["key_group", "key", "namespace", "value", "ttl_timestamp"]
    rows = pa.Table.from_batches([b for f in scan.fragments for b in fragment_batches(f, raw=False,
                                                                                    target_parallelism=None)])
    assert rows.num_rows == 400 and {"start": 10, "end": 20} in rows.column("namespace").to_pylist()
    raw = StateScan.plan(windowed.location, "op", "count", raw=True, target_parallelism=2)
    assert raw.schema.names == ["key_group", "key", "namespace", "value", "subtask"]


def test_timer_fragments_keep_key_groups_whole_and_timers_distinct(windowed):
    op = windowed.operator("op").proto
    service = find_timer_service(op, "t")
    fragments = [pickle.loads(pickle.dumps(f)) for f in chunk_fragments(windowed, op, service, target_bytes=300,
                                                                         whole_key_groups=True)]
    assert len(fragments) > 2
    groups = [{c.key_group for c in pb.Operator.FromString(f.operator).timer_services[0].chunks} for f in fragments]
    assert all(not (a & b) for i, a in enumerate(groups) for b in groups[i + 1:])  # no key group in two fragments
    timers = pa.Table.from_batches([b for f in fragments for b in keyed_batches(f, raw=False, target_parallelism=4)])
    assert timers.num_rows == 200  # 250 rows stored, 200 distinct timers
    assert timers.column_names == ["key_group", "key", "namespace", "timestamp", "subtask"]
    scan = StateScan.plan(windowed.location, "op", None, timer_service="t", domain="event_time")
    assert scan.schema.names == ["key_group", "key", "namespace", "timestamp"]


def test_broadcast_rows_per_subtask(windowed):
    scan = StateScan.plan(windowed.location, "op", "rules", target_parallelism=5)
    assert scan.schema.names == ["subtask", "index", "key", "value"]
    rows = pa.Table.from_batches([b for f in scan.fragments for b in fragment_batches(f, raw=False,
                                                                                    target_parallelism=5)])
    by_subtask = {}
    for r in rows.to_pylist():
        by_subtask.setdefault(r["subtask"], {})[r["key"]] = r["value"]
    assert by_subtask == {i: {f"r{j}": j for j in range(40)} for i in range(5)}


def test_a_broadcast_map_repeating_a_key_is_refused_by_its_task(windowed):
    op = pb.Operator()
    op.CopyFrom(windowed.operator("op").proto)
    state = op.broadcast_states[0]
    state.partitions[1].ranges.append(pb.ElementRange(chunk=0, first=0, count=1))
    assignment = plan_list_state(op, 3)["rules"]
    fragments = list_fragments(windowed, op, state, assignment, target_bytes=1)
    assert len({r.subtask for f in fragments for r in f.runs}) == 3
    assert all(len({r.subtask for r in f.runs}) == 1 for f in fragments)  # never a map cut in two
    with pytest.raises(CorruptSavepointError, match="rule B5"):
        [b for f in fragments for b in fragment_batches(f, raw=True, target_parallelism=None)]


def test_a_broadcast_fragment_decodes_the_shared_map_once(tmp_path, monkeypatch):
    """The subtasks of a fragment each read their own entries and the map they share: runs
    own 0, shared, own 1, shared, ... decode the shared chunk once (read_indexed)."""
    from pyref import reader

    with SavepointWriter(str(tmp_path / "sp"), inline_bytes=0) as w:
        rules = w.add_operator("op", 3).broadcast_state("rules", String(), Int64())
        rules.add_all([f"r{i}" for i in range(40)], list(range(40)))
        for i in range(3):
            rules.add(i, [f"own-{i}"], [i])
    sp = Savepoint.open(tmp_path / "sp")
    (fragment,) = StateScan.plan(sp.location, "op", "rules").fragments
    assert [r.chunk for r in fragment.runs] != sorted(r.chunk for r in fragment.runs)  # the chunks interleave
    decoded = []
    original = reader.decode_chunk
    monkeypatch.setattr(reader, "decode_chunk", lambda *a, **k: decoded.append(1) or original(*a, **k))
    rows = pa.Table.from_batches(list(fragment_batches(fragment, raw=False, target_parallelism=None)))
    assert rows.num_rows == 3 * 41 and len(decoded) == 4  # the shared chunk and each subtask's own
