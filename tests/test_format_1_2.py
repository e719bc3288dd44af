"""Format 1.2 in the core library: namespaces, TTL, reducing/aggregating state, timers,
broadcast state, coordinator state, writer-assigned key groups; the manifest rules they
bring (M9, O6, O7, K7, T1-T5, B1-B5), and rescale, copy and migrate carrying them."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from pyref import CorruptSavepointError, InvalidArgumentError, Savepoint, SavepointWriter, UnsupportedFormatError
from pyref import migrate_state, rescale
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.checksum import crc32c
from pyref.chunk import encode_chunk
from pyref.inspection import describe, verify
from pyref.key_groups import assign_to_key_group, key_group_range
from pyref.manifest import decode_manifest, encode_manifest
from pyref.serializers import Int32, Int64, Nullable, Opaque, String, TimeWindow, Window
from pyref.ttl import TtlConfig

KEYS = [f"user-{i}" for i in range(24)]
W1, W2 = Window(0, 60000), Window(60000, 120000)
KRYO = Opaque("flink", "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot", b"kryo")


def write_windowed(path, **options) -> None:
    """A windowed count with its window timers, a TTL state, a reducing state, a broadcast
    map and coordinator state: every 1.2 part of a keyed operator."""
    with SavepointWriter(str(path), **options) as w:
        op = w.add_operator("windows", 2, max_parallelism=32, key_serializer=String(), uid="windowed-count",
                            engine_operator_id=bytes(range(16)))
        count = op.keyed_state("count", Int64(), namespace_serializer=TimeWindow())
        count.add(KEYS + KEYS[:5], list(range(24)) + [100] * 5, namespaces=[W1] * 24 + [W2] * 5)
        op.keyed_state("last-seen", Int32(), ttl=TtlConfig(3_600_000)).add(
            KEYS[:4], [1, 2, 3, 4], ttl_timestamps=[1000, 2000, 3000, 4000])
        op.keyed_state("sum", Int64(), kind="reducing").add(KEYS[:3], [7, 8, 9])
        timers = op.timer_service("window-timers", "event_time", namespace_serializer=TimeWindow())
        timers.add(KEYS, [W1.end - 1] * 24, [W1] * 24)
        timers.add(KEYS[:5], [W2.end - 1] * 5, [W2] * 5)
        op.broadcast_state("rules", String(), String()).add_all(["deny", "allow"], ["/admin", "*"])
        op.coordinator_state = b"\x00\x00\x00\x02splits"


def manifest_of(path) -> pb.Manifest:
    return decode_manifest((path / "_manifest").read_bytes(), path=str(path))[0]


def reencoded(path, change) -> Savepoint:
    """The savepoint at ``path`` with its manifest changed by ``change`` (envelope and CRC made valid)."""
    m = manifest_of(path)
    change(m)
    (path / "_manifest").write_bytes(encode_manifest(m, 2))
    return Savepoint.open(path)


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    path = tmp_path_factory.mktemp("w") / "sp"
    write_windowed(path, inline_bytes=0)
    return path


def test_label_and_features(windowed):
    sp = Savepoint.open(windowed)
    assert str(sp.version) == "1.2"
    assert list(sp.manifest.required_features) == ["timers", "broadcast-state", "coordinator-state",
                                                   "keyed-namespaces", "state-ttl", "reducing-aggregating-state",
                                                   "serializers-1-2"]


def test_informative_fields_alone_keep_the_older_label(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", 1, uid="my-uid", engine_operator_id=b"\x01" * 16)
    sp = Savepoint.open(tmp_path / "sp")
    assert str(sp.version) == "1.0" and not sp.manifest.required_features
    assert (sp.operator("op").uid, sp.operator("op").engine_operator_id) == ("my-uid", b"\x01" * 16)


def test_namespaced_state_last_row_wins_per_key_and_namespace(windowed):
    view = Savepoint.open(windowed).operator("windows").keyed_state("count")
    assert view.get("user-3", namespace=W1) == 3 and view.get("user-3", namespace=W2) == 100
    assert view.get("user-9", namespace=W2) is None
    with pytest.raises(InvalidArgumentError, match="namespace"):
        view.get("user-3")
    table = view.to_arrow()
    assert table.column_names == ["key_group", "key", "namespace", "value"]
    assert {"start": 60000, "end": 120000} in table.column("namespace").to_pylist()
    assert ("user-0", W2, 100) in set(view.items())


def test_ttl_values_keep_their_timestamps(windowed):
    view = Savepoint.open(windowed).operator("windows").keyed_state("last-seen")
    assert view.ttl == TtlConfig(3_600_000)
    assert view.get("user-2") == 3 and view.get("user-2", with_ttl=True) == (3, 3000)
    assert sorted(view.items(with_ttl=True)) == [("user-0", 1, 1000), ("user-1", 2, 2000), ("user-2", 3, 3000),
                                                  ("user-3", 4, 4000)]
    assert view.to_arrow().column_names == ["key_group", "key", "value", "ttl_timestamp"]


def test_ttl_list_and_map_state(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", 1, key_serializer=Int64())
        op.keyed_state("l", String(), kind="list", ttl=TtlConfig(10)).add([1, 2], [["a", "bc"], []],
                                                                          ttl_timestamps=[[5, 6], 7])
        op.keyed_state("m", Int32(), kind="map", user_key_serializer=String(), ttl=TtlConfig(10)).add(
            [1, 1], [10, 11], ["x", "y"], ttl_timestamps=[8, 9])
    op = Savepoint.open(tmp_path / "sp").operator("op")
    assert op.keyed_state("l").get(1) == ["a", "bc"] and op.keyed_state("l").get(1, with_ttl=True) == [(5, "a"), (6, "bc")]
    assert op.keyed_state("l").to_arrow().to_pylist()[0]["ttl_timestamp"] in ([5, 6], [])
    assert op.keyed_state("m").get(1, with_ttl=True) == {"x": (10, 8), "y": (11, 9)}
    with SavepointWriter(str(tmp_path / "bad")) as w:
        state = w.add_operator("op", 1, key_serializer=Int64()).keyed_state("l", String(), kind="list",
                                                                            ttl=TtlConfig(10))
        with pytest.raises(InvalidArgumentError, match="2 TTL timestamps for a list of 1"):
            state.add([1], [["a"]], ttl_timestamps=[[1, 2]])
        with pytest.raises(InvalidArgumentError, match="ttl_timestamps are required"):
            state.add([1], [["a"]])


def test_a_ttl_cell_without_its_timestamp_is_corrupt(windowed, tmp_path):
    import shutil

    shutil.copytree(windowed, tmp_path / "sp")

    def shorten(m):
        state = next(s for s in m.operators[0].keyed_states if s.name == "last-seen")
        payload = encode_chunk([pa.array([String().encode("user-0")]), pa.array([b"\x01\x02"])])
        del state.chunks[:]
        state.chunks.add(key_group=assign_to_key_group("user-0", 32, "string"), row_count=1, inline_data=payload,
                         raw_length=len(payload), crc32c=crc32c(payload))

    view = reencoded(tmp_path / "sp", shorten).operator("windows").keyed_state("last-seen")
    with pytest.raises(CorruptSavepointError, match="less than its 8-byte timestamp"):
        view.get("user-0")


def test_reducing_state_reads_like_value_state(windowed):
    view = Savepoint.open(windowed).operator("windows").keyed_state("sum")
    assert view.kind == "reducing" and view.get("user-1") == 8


def test_timers_move_with_their_key_groups(windowed):
    sp = Savepoint.open(windowed)
    service = sp.operator("windows").timer_service("window-timers")
    assert service.domain == "event_time" and len(list(service.timers())) == 29
    for parallelism in (1, 3, 5):
        plan = sp.restore_plan(parallelism)
        restored = []
        for sub in plan.subtasks("windows"):
            timers = list(sub.timers("window-timers", "event_time"))
            r = sub.key_group_range
            assert all(r.first <= assign_to_key_group(key, 32, "string") <= r.last for key, _, _ in timers)
            restored += timers
        assert sorted(restored) == sorted(service.timers())


def test_a_timer_stored_twice_is_one_timer(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        timers = w.add_operator("op", 1, key_serializer=Int64()).timer_service("t", "processing_time")
        timers.add([1, 1, 2], [50, 50, 60])
    service = Savepoint.open(tmp_path / "sp").operator("op").timer_service("t")
    assert sorted(service.timers()) == [(1, 50), (2, 60)]
    assert service.to_arrow().column_names == ["key_group", "key", "timestamp"]


@pytest.mark.parametrize("timestamps", [[1.5], ["5"], [None], [2**64]])
def test_a_timestamp_int64_cannot_hold_is_refused_naming_the_service(tmp_path, timestamps):
    """A fraction of a ms was truncated (1.5 stored as 1), a str raised ValueError, 2**64 OverflowError."""
    with SavepointWriter(str(tmp_path / "sp")) as w:
        timers = w.add_operator("op", 1, key_serializer=Int64()).timer_service("t", "event_time")
        with pytest.raises(InvalidArgumentError, match=r"state=op/t \(event_time timers\)"):
            timers.add([1], timestamps)
        timers.add([1, 2], pa.array([5, 6], pa.int32()))
    assert sorted(Savepoint.open(tmp_path / "sp").operator("op").timer_service("t").timers()) == [(1, 5), (2, 6)]


def test_a_value_the_serializer_refuses_names_the_state(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", 1, key_serializer=String())
        with pytest.raises(InvalidArgumentError, match=r"int64 .*string \[state=op/count\]"):
            op.keyed_state("count", Int64()).add(["a"], ["three"])
        with pytest.raises(InvalidArgumentError, match=r"int32 .*\[state=op/offsets\]"):
            op.list_state("offsets", Int32()).add(0, [2**40])
        with pytest.raises(InvalidArgumentError, match=r"\[state=op/rules\]"):
            op.broadcast_state("rules", String(), Int32()).add_all(["r"], ["x"])


def test_a_timestamp_of_other_than_8_bytes_is_corrupt(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", 1, key_serializer=Int64()).timer_service("t", "event_time").add([1], [5])

    def widen(m):
        chunk = m.operators[0].timer_services[0].chunks[0]
        payload = encode_chunk([pa.array([Int64().encode(1)]), pa.array([b"\x05\x00\x00\x00"])])
        chunk.CopyFrom(pb.Chunk(key_group=chunk.key_group, row_count=1, inline_data=payload,
                                raw_length=len(payload), crc32c=crc32c(payload)))

    with pytest.raises(CorruptSavepointError, match="exactly 8"):  # rule T5
        list(reencoded(tmp_path / "sp", widen).operator("op").timer_service("t").timers())


def test_broadcast_state_restores_by_the_broadcast_rule(windowed):
    sp = Savepoint.open(windowed)
    view = sp.operator("windows").broadcast_state("rules")
    assert list(view.partitions()) == [{"deny": "/admin", "allow": "*"}] * 2
    assert len(view.proto.chunks) == 1  # the map is stored once, both partitions refer to it
    plan = sp.restore_plan(3)
    assert [plan.subtask("windows", i).broadcast_state("rules") for i in range(3)] == [{"deny": "/admin",
                                                                                       "allow": "*"}] * 3


def test_broadcast_partitions_follow_i_mod_old_parallelism(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        state = w.add_operator("op", 2).broadcast_state("b", String(), Int32())
        state.add(0, ["a"], [0])
        state.add(1, ["b"], [1])
        with pytest.raises(InvalidArgumentError, match="already in the map"):
            state.add(1, ["b"], [2])
    plan = Savepoint.open(tmp_path / "sp").restore_plan(5)
    assert [plan.subtask("op", i).broadcast_state("b") for i in range(5)] == [{"a": 0}, {"b": 1}] * 2 + [{"a": 0}]
    rescale(tmp_path / "sp", tmp_path / "sp3", 3)
    rescaled = Savepoint.open(tmp_path / "sp3").operator("op").broadcast_state("b")
    assert list(rescaled.partitions()) == [{"a": 0}, {"b": 1}, {"a": 0}]


def test_a_broadcast_partition_that_repeats_a_key_is_corrupt(tmp_path):
    """Two rows of one key in a partition break B5 (found when the partition is read); one
    row selected twice breaks L6 too, and is refused when the manifest is opened."""
    with SavepointWriter(str(tmp_path / "sp")) as w:
        state = w.add_operator("op", 2).broadcast_state("b", String(), Int32())
        state.add(0, ["a", "b"], [1, 2])
        state.add(1, ["a"], [3])

    def other_row_of_a(m):
        partitions = m.operators[0].broadcast_states[0].partitions
        partitions[0].ranges.append(partitions[1].ranges[0])

    sp = reencoded(tmp_path / "sp", other_row_of_a)
    with pytest.raises(CorruptSavepointError, match="rule B5"):
        sp.operator("op").broadcast_state("b").partition(0)
    assert sp.operator("op").broadcast_state("b").partition(1) == {"a": 3}
    assert not verify(sp).ok

    def same_row_twice(m):
        partition = m.operators[0].broadcast_states[0].partitions[1]
        partition.ranges.append(partition.ranges[0])

    with pytest.raises(CorruptSavepointError, match="rule L6"):
        reencoded(tmp_path / "sp", same_row_twice)


def test_coordinator_state_is_kept_by_every_derivation(windowed, tmp_path):
    assert Savepoint.open(windowed).operator("windows").coordinator_state == b"\x00\x00\x00\x02splits"
    rescale(windowed, windowed.parent / "sp1", 1)
    rescale(windowed, tmp_path / "copy", 3, copy=True)
    for path in (windowed.parent / "sp1", tmp_path / "copy"):
        assert Savepoint.open(path).operator("windows").coordinator_state == b"\x00\x00\x00\x02splits"


def _contents(path) -> dict:
    """Everything a restore sees, per part, as plain data."""
    sp = Savepoint.open(path)
    op = sp.operator("windows")
    return {
        "count": sorted(op.keyed_state("count").items()),
        "last-seen": sorted(op.keyed_state("last-seen").items(with_ttl=True)),
        "sum": sorted(op.keyed_state("sum").items()),
        "timers": sorted(op.timer_service("window-timers").timers()),
        "rules": op.broadcast_state("rules").partition(0),
        "coordinator": op.coordinator_state,
        "identity": (op.uid, op.engine_operator_id),
        "features": list(sp.manifest.required_features),
    }


def test_rescale_copy_and_migrate_carry_every_part(windowed, tmp_path):
    before = _contents(windowed)
    rescale(windowed, windowed.parent / "sp5", 5)
    rescale(windowed, tmp_path / "copied", 5, copy=True)
    for path in (windowed.parent / "sp5", tmp_path / "copied"):
        after = _contents(path)
        assert after.pop("features")[-1:] == before["features"][-1:]
        assert after == {k: v for k, v in before.items() if k != "features"}
    # Rescaling moves no timer chunk: they are referred to as they are, like keyed chunks.
    source = manifest_of(windowed).operators[0].timer_services[0].chunks
    assert list(manifest_of(windowed.parent / "sp5").operators[0].timer_services[0].chunks) == list(source)
    migrate_state(windowed, windowed.parent / "migrated", "windows", "last-seen", Int64())
    migrated = _contents(windowed.parent / "migrated")
    assert migrated["last-seen"] == before["last-seen"] and migrated["timers"] == before["timers"]
    migrate_state(windowed, windowed.parent / "nullable", "windows", "count", Nullable(Int64()))
    assert _contents(windowed.parent / "nullable")["count"] == before["count"]


def test_writer_assigned_key_groups(tmp_path):
    keys = [b"\x01pojo-a", b"\x01pojo-b", b"\x01pojo-c"]
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", 2, max_parallelism=8, key_serializer=KRYO, key_groups="writer")
        state = op.keyed_state("v", Int32())
        with pytest.raises(InvalidArgumentError, match="pass key_groups"):
            state.add(keys, [1, 2, 3])
        state.add(keys, [1, 2, 3], key_groups=[7, 0, 7])
        op.timer_service("t", "event_time").add(keys[:1], [99], key_groups=[7])
    sp = Savepoint.open(tmp_path / "sp")
    assert "writer-assigned-key-groups" in sp.manifest.required_features
    view = sp.operator("op").keyed_state("v")
    assert view.get(keys[2]) == 3 and view.get(keys[2], key_group=7) == 3 and view.get(keys[2], key_group=0) is None
    with pytest.raises(InvalidArgumentError, match="no hash"):
        view.key_group_of(keys[0])
    plan = sp.restore_plan(2)
    assert [dict(plan.subtask("op", i).keyed_state("v")) for i in range(2)] == [{keys[1]: 2}, {keys[0]: 1, keys[2]: 3}]
    assert list(plan.subtask("op", 1).timers("t")) == [(keys[0], 99)]
    with SavepointWriter(str(tmp_path / "hashed")) as w:
        with pytest.raises(UnsupportedFormatError, match="cannot serialize keys"):
            w.add_operator("op", 1, key_serializer=KRYO)


def test_describe_and_verify_cover_every_part(windowed):
    sp = Savepoint.open(windowed)
    report = verify(sp)
    assert report.ok and report.chunks >= len(manifest_of(windowed).operators[0].timer_services[0].chunks)
    op = describe(sp).operators[0]
    assert (op.uid, op.key_groups, op.coordinator_state_bytes) == ("windowed-count", "hashed", 10)
    assert op.timer_services[0].timers == 29
    assert {s.name: s.to_dict()["type"] for s in op.states}["rules"] == "broadcast"



@pytest.mark.parametrize("part", ["timers", "broadcast", "coordinator"])
def test_verify_reads_timer_broadcast_and_coordinator_chunks(tmp_path, part):
    """A flipped stored byte in any 1.2 part is found by verify, which names the part."""
    write_windowed(tmp_path / "sp", inline_bytes=0)
    op = manifest_of(tmp_path / "sp").operators[0]
    chunk, label = {"timers": (op.timer_services[0].chunks[0], "timers)"),
                    "broadcast": (op.broadcast_states[0].chunks[0], "windows/rules"),
                    "coordinator": (op.coordinator_state, "coordinator state")}[part]
    data = next((tmp_path / "sp" / "data").iterdir())
    raw = bytearray(data.read_bytes())
    raw[chunk.range.offset + chunk.range.length - 1] ^= 0x01
    data.write_bytes(bytes(raw))
    report = verify(Savepoint.open(tmp_path / "sp"))
    assert not report.ok and any(label in e and "CRC32C" in e for e in report.errors), report.errors


# --------------------------------------------------------------------------
# Manifest rules of 1.2 (spec/format.md §5): each one refused with its kind of error
# --------------------------------------------------------------------------


def _broken(windowed, change):
    m = manifest_of(windowed)
    change(m)
    return encode_manifest(m, 2)


def _op(m):
    return m.operators[0]


@pytest.mark.parametrize("rule, change, error, match", [
    ("M9", lambda m: m.required_features.remove("timers"), CorruptSavepointError, r"\['timers'\] without listing"),
    ("M9", lambda m: m.required_features.remove("state-ttl"), CorruptSavepointError, "state-ttl"),
    ("O3", lambda m: setattr(_op(m).broadcast_states[0], "name", "count"), CorruptSavepointError, "not unique"),
    ("O4", lambda m: (m.required_features.remove("keyed-namespaces"), m.required_features.remove("state-ttl"),
                      m.required_features.remove("reducing-aggregating-state"), _op(m).ClearField("keyed_states"),
                      _op(m).ClearField("key_serializer")), CorruptSavepointError, "timer service"),
    ("O6", lambda m: setattr(_op(m), "key_groups", 7), UnsupportedFormatError, "key-group assignment 7"),
    ("O7", lambda m: setattr(_op(m).coordinator_state, "row_count", 2), CorruptSavepointError, "one row"),
    ("K1", lambda m: setattr(_op(m).keyed_states[2], "kind", 6), UnsupportedFormatError, "kind 6"),
    ("K7", lambda m: setattr(_op(m).keyed_states[1].ttl, "ttl_ms", 0), CorruptSavepointError, "at least 1"),
    ("K7", lambda m: setattr(_op(m).keyed_states[1].ttl, "update_type", 0), CorruptSavepointError, "unspecified"),
    ("K7", lambda m: setattr(_op(m).keyed_states[1].ttl, "visibility", 9), UnsupportedFormatError, "visibility 9"),
    ("T1", lambda m: _op(m).timer_services.append(_op(m).timer_services[0]), CorruptSavepointError, "not unique"),
    ("T2", lambda m: setattr(_op(m).timer_services[0], "domain", 0), CorruptSavepointError, "no time domain"),
    ("T2", lambda m: setattr(_op(m).timer_services[0], "domain", 3), UnsupportedFormatError, "time domain 3"),
    ("T3", lambda m: setattr(_op(m).timer_services[0].chunks[0], "key_group", 32), CorruptSavepointError,
     "max parallelism is 32"),
    ("B2", lambda m: _op(m).broadcast_states[0].ClearField("value_serializer"), CorruptSavepointError,
     "key or value serializer"),
    ("B3", lambda m: _op(m).broadcast_states[0].partitions.pop(), CorruptSavepointError, "1 partitions"),
    ("B4", lambda m: setattr(_op(m).broadcast_states[0].chunks[0], "key_group", 1), CorruptSavepointError,
     "key group"),
])
def test_rules_of_1_2(windowed, rule, change, error, match):
    with pytest.raises(error, match=match):
        decode_manifest(_broken(windowed, change), path="_manifest")


def test_a_namespace_column_the_state_does_not_declare_is_corrupt(windowed, tmp_path):
    """K5 and P2: without its namespace serializer the state has 2 columns, its chunks 3."""
    import shutil

    shutil.copytree(windowed, tmp_path / "sp")
    sp = reencoded(tmp_path / "sp", lambda m: _op(m).keyed_states[0].ClearField("namespace_serializer"))
    with pytest.raises(CorruptSavepointError, match="3 columns, manifest says .* 2"):
        list(sp.operator("windows").keyed_state("count").items())


def test_a_1_1_reader_refuses_a_1_2_savepoint_by_feature(windowed, monkeypatch):
    monkeypatch.setattr("pyref.manifest.KNOWN_REQUIRED_FEATURES", frozenset({"external-bases"}))
    with pytest.raises(UnsupportedFormatError, match="'timers'"):
        Savepoint.open(windowed)


def test_restore_plan_reads_only_its_key_groups_timers(windowed):
    sp = Savepoint.open(windowed)
    sub = sp.restore_plan(4).subtask("windows", 2)
    r = key_group_range(32, 4, 2)
    assert all(r.first <= c.key_group <= r.last for c in sub.timer_chunks("window-timers"))
    assert sub.planned_bytes() >= sum(c.range.length for c in sub.timer_chunks("window-timers"))
    assert struct.unpack_from("<HH", (windowed / "_manifest").read_bytes(), 8) == (1, 2)


def test_operator_identity_is_checked_when_given(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        with pytest.raises(InvalidArgumentError, match="uid"):
            w.add_operator("op", 1, uid="\ud800")
        with pytest.raises(InvalidArgumentError, match="engine_operator_id must be bytes"):
            w.add_operator("op", 1, engine_operator_id="0102")
        w.add_operator("op", 1, uid="ok")
    assert Savepoint.open(tmp_path / "sp").operator("op").uid == "ok"
