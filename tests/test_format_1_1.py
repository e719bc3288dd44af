"""Format 1.1: the optional feature "chunk-key-bounds", readable by 1.0 rules."""

from __future__ import annotations

import struct

from pyref import KeyGroupRange, Savepoint, SavepointWriter, migrate_state, rescale
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.manifest import decode_manifest
from pyref.serializers import Int32, Int64, String


def _write(path, **options):
    with SavepointWriter(str(path), inline_bytes=0, chunk_bytes=64, **options) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=4, key_serializer=String())
        op.keyed_state("count", Int32()).add([f"k{i:03d}" for i in range(200)], list(range(200)))


def _version(path):
    return struct.unpack_from("<HH", (path / "_manifest").read_bytes(), 8)


def test_savepoint_without_new_features_is_labelled_1_0(tmp_path):
    _write(tmp_path / "sp")
    assert _version(tmp_path / "sp") == (1, 0)
    assert not any(c.HasField("key_bounds") for c in Savepoint.open(tmp_path / "sp").manifest.operators[0]
                   .keyed_states[0].chunks)


def test_key_bounds_label_1_1_and_prune_point_lookups(tmp_path):
    _write(tmp_path / "sp", sort_keys=True)
    assert _version(tmp_path / "sp") == (1, 1)
    sp = Savepoint.open(tmp_path / "sp")
    assert list(sp.manifest.optional_features) == ["chunk-key-bounds"]
    state = sp.operator("op").keyed_state("count")
    for chunk in state.proto.chunks:
        keys = next(state.read_encoded([chunk]))[1][0].to_pylist()
        assert chunk.key_bounds.min == min(keys) and chunk.key_bounds.max == max(keys) and keys == sorted(keys)
    before = sp.store.bytes_read
    assert state.get("k042") == 42
    group = state.key_group_of("k042")
    group_chunks = state.chunks_in(KeyGroupRange(group, group))
    assert len(group_chunks) > 1  # several chunks in the key group, but the lookup read one
    assert sp.store.bytes_read - before == max(c.range.length for c in group_chunks
                                               if c.key_bounds.min <= b"k042" <= c.key_bounds.max)


def test_a_1_0_reader_reads_1_1_files_by_the_1_0_rules(tmp_path, monkeypatch):
    """1.0 rules: accept a newer minor, ignore unknown optional features and unknown fields."""
    _write(tmp_path / "sp", key_bounds=True)
    monkeypatch.setattr("pyref.manifest.KNOWN_OPTIONAL_FEATURES", frozenset())  # 1.0 knew none
    sp = Savepoint.open(tmp_path / "sp")
    assert (sp.version.major, sp.version.minor) == (1, 1)
    # A 1.0 reader's point lookup ignores the bounds and scans the key group: same answer.
    for chunk in sp.manifest.operators[0].keyed_states[0].chunks:
        chunk.ClearField("key_bounds")
    state = sp.operator("op").keyed_state("count")
    assert state.get("k007") == 7 and len(dict(state.items())) == 200


def test_derived_savepoints_keep_bounds_and_drop_unknown_features(tmp_path):
    _write(tmp_path / "sp", key_bounds=True)
    m, _ = decode_manifest((tmp_path / "sp" / "_manifest").read_bytes(), path="x")
    assert m.optional_features == ["chunk-key-bounds"]
    rescaled = rescale(tmp_path / "sp", tmp_path / "sp1", 1)
    assert rescaled.info.optional_features == ["chunk-key-bounds"] and str(rescaled.version) == "1.1"
    migrated = migrate_state(tmp_path / "sp", tmp_path / "sp64", "op", "count", Int64())
    assert all(c.HasField("key_bounds") for c in migrated.manifest.operators[0].keyed_states[0].chunks)
    assert Savepoint.open(tmp_path / "sp64").operator("op").keyed_state("count").get("k199") == 199
