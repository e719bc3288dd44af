"""Flink CEP state (flink-cep's NFA state and shared buffer serializers) read, imported and exported.

The fixtures under data/cep are real canonical savepoints of compat_tests/flink's CEP job
(jobs/CepJob.java at parallelism 1: a followedBy pattern within 3.5 s and a
oneOrMore().consecutive().next() pattern skipping past its last event, in event time, stopped at
watermark 10000 with runs partial and each key's last two events queued), one of Flink 2.3.0
(HashMap backend) and one of 1.20.3 (RocksDB), state inlined in ``_metadata``."""

from __future__ import annotations

import pathlib

import pytest

from compat_tests.flink.cep import OPERATORS, STATE_TYPES
from compat_tests.flink.sql import keyed_contents, state_types
from pyref.cli import main as pyref_cli
from pyref.errors import CorruptSavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint, export_savepoint, import_flink
from pyref.flink.cep import ComputationState, EventId, Lockable, NFAState, NodeId, SharedBufferEdge
from pyref.flink.datainput import DataInput
from pyref.flink.serializers import at_position, read_versioned_snapshot
from pyref.flink.transcode import transcoder
from pyref.flink.values import codec_for, decode_cell
from pyref.serializers import Int32, Int64, Tuple
from pyref.testing.flink_bytes import composite, i32, i64, list_snapshot, snapshot

DATA = pathlib.Path(__file__).resolve().parent / "data" / "cep"
SAVEPOINTS = {"2.3.0": DATA / "2.3.0-hashmap", "1.20.3": DATA / "1.20.3-rocksdb"}
#: Phase 1's final watermark in CepJob.
WATERMARK = 10_000
_N = "org.apache.flink.cep.nfa."
# Spelled here as Flink's sources spell them, not taken from pyref: a typo there must fail here.
NFA_STATE = _N + "NFAStateSerializerSnapshot"
DEWEY = _N + "DeweyNumber$DeweyNumberSerializer$DeweyNumberSerializerSnapshot"
EVENT_ID = _N + "sharedbuffer.EventId$EventIdSerializer$EventIdSerializerSnapshot"
NODE_ID = _N + "sharedbuffer.NodeId$NodeIdSerializer$NodeIdSerializerSnapshot"


def cep_states(version: str) -> list[dict]:
    """Per CEP operator: its keyed states decoded, name -> items."""
    with FlinkSavepoint.open(SAVEPOINTS[version]) as savepoint:
        return [{name: list(op.keyed_state(name).items()) for name in op.keyed_state_names}
                | {"timers": op.timers("watermark-callbacks", "event-time").to_arrow().to_pylist()}
                for op in savepoint.operators if op.keyed_state_names]


@pytest.mark.parametrize("version", sorted(SAVEPOINTS))
def test_cep_state_has_its_exact_types(version):
    types = state_types(SAVEPOINTS[version])
    assert sorted(set(types)) == STATE_TYPES and len(types) == OPERATORS * len(STATE_TYPES)
    assert pyref_cli(["verify", str(SAVEPOINTS[version])]) == 0


@pytest.mark.parametrize("version", sorted(SAVEPOINTS))
def test_partial_matches_point_into_the_shared_buffer(version):
    """Every partial match's last node is an entry of the shared buffer, every entry's event is
    a buffered event of its key (a POJO of that key, seen before the watermark), every edge
    leads to another entry or starts the match."""
    operators = cep_states(version)
    assert len(operators) == OPERATORS
    for states in operators:
        nfa = dict(states["nfaStateName"])
        entries = {(key, node): lockable for key, node, lockable in states["sharedBuffer-entries-with-lockable-edges"]}
        events = {(key, event_id): lockable for key, event_id, lockable in states["sharedBuffer-events"]}
        assert nfa and entries and events
        pending = [(key, m) for key, state in nfa.items() for m in state.partial_matches if m.previous is not None]
        assert pending and all((key, m.previous) in entries for key, m in pending)
        for (key, node), lockable in entries.items():
            assert isinstance(node, NodeId) and node.page in ("a", "b") and (key, node.event_id) in events
            assert lockable.ref_count > 0 and lockable.element
            for edge in lockable.element:
                assert isinstance(edge.element, SharedBufferEdge) and edge.ref_count > 0
                assert edge.element.target is None or (key, edge.element.target) in entries
                assert edge.element.version and all(d >= 0 for d in edge.element.version)
        for (key, event_id), lockable in events.items():
            assert isinstance(lockable, Lockable) and lockable.element["key"] == key
            assert event_id == EventId(0, lockable.element["ts"]) and event_id.timestamp <= WATERMARK
        # Each match stores its previous event's time since Flink 1.16 (the snapshot's flag).
        assert all(m.previous_timestamp is not None for state in nfa.values() for m in state.partial_matches)


#: The first events (seq) of each key's partial matches at the savepoint, from CepJob's KINDS (seq 0-9
#: processed): followed-by waits for a large event after each small one since the last large one
#: that is still within 3.5 s of the watermark; run extends the block of small events ending at 9
#: from each of its events.
PENDING = {
    "followed-by": {"k0": {7, 8, 9}, "k1": {8, 9}, "k2": {7, 8, 9}, "k4": {7, 8, 9}, "k5": {8, 9}},
    "run": {"k0": {7, 8, 9}, "k1": {8, 9}, "k2": {6, 7, 8, 9}, "k4": {7, 8, 9}, "k5": {8, 9}},
}


@pytest.mark.parametrize("version", sorted(SAVEPOINTS))
def test_partial_matches_start_where_the_patterns_say(version):
    pending = []
    for states in cep_states(version):
        starts: dict[str, set[int]] = {}
        for key, state in states["nfaStateName"]:
            for m in state.partial_matches:
                if m.start_event is not None:
                    starts.setdefault(key, set()).add((m.start_event.timestamp - 100 - 10 * int(key[1:])) // 1000)
        pending.append(starts)
    assert sorted(pending, key=str) == sorted(PENDING.values(), key=str)


@pytest.mark.parametrize("version", sorted(SAVEPOINTS))
def test_run_nodes_chain_back_through_versioned_edges(version):
    """The oneOrMore run's nodes: each event of a block of small events is reached from the next
    one by an edge per run through it (so the shared buffer holds edges between nodes, Dewey
    versions several digits long and nodes locked more than once)."""
    entries = [node for states in cep_states(version)
               for node in states["sharedBuffer-entries-with-lockable-edges"]]
    assert any(lockable.ref_count > 1 for _, _, lockable in entries)
    linked = [edge.element for _, _, lockable in entries for edge in lockable.element if edge.element.target]
    assert linked and all(e.target.page == "a" for e in linked)
    assert max(len(e.version) for e in linked) >= 3


@pytest.mark.parametrize("version", sorted(SAVEPOINTS))
def test_events_after_the_watermark_wait_in_the_queue_with_their_timers(version):
    for states in cep_states(version):
        queued = states["eventQueuesStateName"]
        assert {(key, ts) for key, ts, _ in queued} == {(f"k{k}", 1000 * seq + 100 + 10 * k)
                                                        for k in range(6) for seq in (10, 11)}
        assert all(len(events) == 1 and events[0]["ts"] == ts and events[0]["key"] == key for key, ts, events in queued)
        assert {ts for _, ts, _ in queued} <= {t["timestamp"] for t in states["timers"]}
        assert states["sharedBuffer-events-count"] == []  # counts before the watermark are dropped


@pytest.mark.parametrize("version", sorted(SAVEPOINTS))
def test_import_and_export_keep_every_cep_row_exactly(version, tmp_path):
    import_flink(SAVEPOINTS[version], tmp_path / "pyref")
    assert pyref_cli(["verify", str(tmp_path / "pyref")]) == 0
    export_savepoint(tmp_path / "pyref", tmp_path / "flink", flink_version=version)
    original = keyed_contents(SAVEPOINTS[version])
    assert sum(len(rows) for name, rows in original.items() if "sharedBuffer" in name or "nfaState" in name) > 10
    assert keyed_contents(tmp_path / "flink") == original
    assert state_types(tmp_path / "flink") == state_types(SAVEPOINTS[version])


def nfa_state_snapshot(outer_version: int, outer: bytes) -> bytes:
    return composite(NFA_STATE, [snapshot(DEWEY), composite(NODE_ID, [snapshot(EVENT_ID)]), snapshot(EVENT_ID)],
                     outer, outer_version)


def computation_state(*, previous_timestamp: bool) -> bytes:
    """State "b" after node (event 3 @ 7000, page "a"), version 1.0, started at 7000, with its start event."""
    node = b"\x01" + i32(3) + i64(7000) + b"\x02a"
    return (b"\x02b" + node + i32(2) + i32(1) + i32(0) + i64(7000) + (i64(7500) if previous_timestamp else b"")
            + b"\x01" + i32(3) + i64(7000))


@pytest.mark.parametrize("outer_version, flag, stored", [(1, b"", False), (2, b"\x00", False), (2, b"\x01", True)])
def test_nfa_state_reads_the_previous_timestamp_only_when_its_snapshot_says_so(outer_version, flag, stored):
    data = nfa_state_snapshot(outer_version, flag)
    type_ = read_versioned_snapshot(DataInput(data), at_position(len(data)))
    assert type_.describe() == "cep-nfa-state<cep-dewey-number,cep-node-id<cep-event-id>,cep-event-id>"
    value = i32(1) + computation_state(previous_timestamp=stored) + i32(0)
    assert decode_cell(codec_for(type_), value) == NFAState(
        [ComputationState("b", NodeId(EventId(3, 7000), "a"), (1, 0), 7000, 7500 if stored else None, EventId(3, 7000))],
        [])


def test_a_node_id_flag_other_than_0_or_1_is_corrupt():
    data = composite(NODE_ID, [snapshot(EVENT_ID)])
    codec = codec_for(read_versioned_snapshot(DataInput(data), at_position(len(data))))
    assert decode_cell(codec, b"\x00") is None
    with pytest.raises(CorruptSavepointError, match="node id flag"):
        decode_cell(codec, b"\x02" + i32(0) + i64(1) + b"\x02a")


def test_the_legacy_shared_buffer_node_is_a_list_of_edges_without_reference_counts():
    """The serializer of older releases' ``sharedBuffer-entries`` (migrated by Flink on restore)."""
    edge = composite(_N + "sharedbuffer.SharedBufferEdge$SharedBufferEdgeSerializer$SharedBufferEdgeSerializerSnapshot",
                     [composite(NODE_ID, [snapshot(EVENT_ID)]), snapshot(DEWEY)])
    data = composite(_N + "sharedbuffer.SharedBufferNode$SharedBufferNodeSerializer$SharedBufferNodeSerializerSnapshot",
                     [list_snapshot(edge)])
    type_ = read_versioned_snapshot(DataInput(data), at_position(len(data)))
    assert type_.describe() == ("cep-shared-buffer-node-v1<list<cep-shared-buffer-edge<cep-node-id<cep-event-id>,"
                                "cep-dewey-number>>>")
    value = i32(2) + b"\x00" + i32(1) + i32(1) + b"\x01" + i32(0) + i64(5) + b"\x02a" + i32(2) + i32(1) + i32(0)
    assert decode_cell(codec_for(type_), value) == [SharedBufferEdge(None, (1,)),
                                                    SharedBufferEdge(NodeId(EventId(0, 5), "a"), (1, 0))]


def test_pyref_values_are_not_written_as_cep_values():
    """An export writes CEP state only from the Flink bytes an import kept (opaque)."""
    data = composite(NODE_ID, [snapshot(EVENT_ID)])
    target = read_versioned_snapshot(DataInput(data), at_position(len(data)))
    with pytest.raises(UnsupportedFormatError, match="cep-node-id<cep-event-id> values are only kept as opaque bytes"):
        transcoder(Tuple(Int32(), Int64()), target, "sharedBuffer-entries-with-lockable-edges")
