"""The manifest rules issue 13 made explicit, at the level of pyref's API (the corpus cases
of compat_tests/generate_spec_gaps_manifest.py check the same bytes through the kit):
the protobuf rules of spec/format.md §4.5, the checks before reading of §5.10, locations
that hold no savepoint (§2) and the parent of a resolved location (§2.1, §8.1)."""

from __future__ import annotations

import os
import shutil

import pytest

from compat_tests.generate_rejects import _varint
from pyref import Savepoint, rescale
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.errors import CorruptSavepointError, SavepointNotFoundError, UnsupportedFormatError
from pyref.inspection import verify
from pyref.manifest import MAX_MESSAGE_DEPTH, decode_manifest, encode_envelope, encode_manifest
from pyref.manifest_encoding import _wide_manifest_class, has_cut_varints
from pyref.testing import write_seeds


def _field(number: int, wire_type: int, payload: bytes | int) -> bytes:
    key = _varint(number << 3 | wire_type)
    return key + (_varint(payload) if wire_type == 0 else _varint(len(payload)) + payload)


def _wide_body(change) -> bytes:
    """A valid one-operator manifest body, changed as ``change`` says with 64-bit numbers."""
    m = pb.Manifest(savepoint_id="x")
    m.operators.add(operator_id="op", parallelism=1, max_parallelism=1)
    wide = _wide_manifest_class()()
    wide.ParseFromString(m.SerializeToString())
    change(wide)
    return wide.SerializeToString()


def _decode(body: bytes):
    return decode_manifest(encode_envelope(body, 1, 0), path="x")


# --------------------------------------------------------------------------
# §4.5 E2: numbers wider than their 32-bit field
# --------------------------------------------------------------------------


@pytest.mark.parametrize("change", [
    lambda m: setattr(m.operators[0], "parallelism", 2**32 + 1),  # uint32: reads as 1 when cut
    lambda m: setattr(m.operators[0], "max_parallelism", 2**33 + 1),
    lambda m: setattr(m.operators[0], "key_groups", 2**32),  # an enum, int32 on the wire: 0 when cut
    lambda m: setattr(m.operators[0].key_serializer, "version", 2**32 + 1),  # serializer.proto too
], ids=["uint32", "uint32-high", "enum", "nested-in-serializer-snapshot"])
def test_a_number_wider_than_its_32_bit_field_is_corrupt(change):
    body = _wide_body(change)
    narrow = pb.Manifest.FromString(body)
    assert has_cut_varints(body, narrow)
    with pytest.raises(CorruptSavepointError, match="wider than its 32-bit field"):
        _decode(body)


def test_negative_32_bit_values_written_in_ten_bytes_are_not_cut():
    """An int32 (enum) of −1 is a 10-byte varint on the wire: it fits, so it is no E2 case
    but an unknown key-group assignment (rule O6)."""
    body = _wide_body(lambda m: setattr(m.operators[0], "key_groups", -1))
    assert not has_cut_varints(body, pb.Manifest.FromString(body))
    with pytest.raises(UnsupportedFormatError, match="key-group assignment"):
        _decode(body)


# --------------------------------------------------------------------------
# §4.5 E3, E5: merge rules and the nesting limit
# --------------------------------------------------------------------------


def _snapshot_chain(depth: int) -> bytes:
    snapshot = _field(1, 2, b"int64")
    for _ in range(depth - 1):
        snapshot = _field(1, 2, b"list") + _field(3, 2, snapshot)
    return snapshot


@pytest.mark.parametrize("levels", [MAX_MESSAGE_DEPTH, MAX_MESSAGE_DEPTH + 1])
def test_the_manifest_nests_at_most_100_levels(levels):
    """Operator (level 1), its keyed state (2), a chain of snapshots (3 and below)."""
    state = _field(1, 2, b"s") + _field(2, 0, 1) + _field(3, 2, _snapshot_chain(levels - 2))
    operator = _field(1, 2, b"op") + _field(3, 0, 1) + _field(4, 0, 1) + _field(5, 2, _field(1, 2, b"string"))
    body = _field(1, 2, b"x") + _field(8, 2, operator + _field(7, 2, state))
    if levels > MAX_MESSAGE_DEPTH:
        with pytest.raises(CorruptSavepointError, match="not a valid protobuf message"):
            _decode(body)
    else:
        manifest, _ = _decode(body)  # the snapshot's own depth limit is checked before reading (§5.10)
        assert manifest.operators[0].keyed_states[0].value_serializer.serializer_id == "list"


def test_a_message_written_twice_is_merged_and_the_last_oneof_member_wins():
    snapshot = _field(5, 2, _field(1, 2, b"string")) + _field(5, 2, _field(2, 0, 1))
    chunk = _field(2, 0, 0) + _field(3, 2, _field(1, 0, 9)) + _field(4, 2, b"")
    body = _field(8, 2, _field(1, 2, b"op") + snapshot + _field(7, 2, _field(5, 2, chunk)))
    m = pb.Manifest.FromString(body)
    assert (m.operators[0].key_serializer.serializer_id, m.operators[0].key_serializer.version) == ("string", 1)
    assert m.operators[0].keyed_states[0].chunks[0].WhichOneof("location") == "inline_data"


# --------------------------------------------------------------------------
# §5.10: checks before reading state
# --------------------------------------------------------------------------


def test_serializers_are_checked_before_any_chunk_whatever_is_read(tmp_path):
    """A newer built-in on one state, a damaged chunk on another: reading the damaged
    state reports the serializer (unsupported), not the damage; opening reports neither."""
    write_seeds(tmp_path / "sp")
    m, _ = decode_manifest((tmp_path / "sp" / "_manifest").read_bytes(), path="x")
    source = next(o for o in m.operators if o.operator_id == "kafka-source")
    source.list_states[0].element_serializer.serializer_id = "int128"
    counter = next(o for o in m.operators if o.operator_id == "url-counter")
    counter.keyed_states[0].chunks[0].crc32c ^= 1
    (tmp_path / "sp" / "_manifest").write_bytes(encode_manifest(m))
    sp = Savepoint.open(tmp_path / "sp")
    assert {o.operator_id for o in sp.operators} >= {"kafka-source", "url-counter"}
    with pytest.raises(UnsupportedFormatError, match="int128"):
        list(sp.operator("url-counter").keyed_state("count").items())


def _with_unused_replaced_base(tmp_path):
    """A shallow savepoint that also lists ``unused``, a base no chunk uses, replaced since."""
    write_seeds(tmp_path / "base")
    rescale(tmp_path / "base", tmp_path / "sp", 3)
    shutil.copytree(tmp_path / "base", tmp_path / "unused")
    m, _ = decode_manifest((tmp_path / "sp" / "_manifest").read_bytes(), path="x")
    m.bases.add(directory="unused", savepoint_id="00000000-0000-4000-8000-000000000001")
    (tmp_path / "sp" / "_manifest").write_bytes(encode_manifest(m))


def test_a_listed_base_no_chunk_uses_is_resolved_before_reading(tmp_path):
    _with_unused_replaced_base(tmp_path)
    sp = Savepoint.open(tmp_path / "sp")  # opening does not resolve bases
    with pytest.raises(CorruptSavepointError, match="'unused' was replaced"):
        sp.restore_plan(1)
    with pytest.raises(CorruptSavepointError, match="'unused' was replaced"):
        Savepoint.open(tmp_path / "sp").operator("kafka-source").list_state("offsets")


def test_verify_reports_the_checks_before_reading_once_and_verifies_the_rest(tmp_path):
    _with_unused_replaced_base(tmp_path)
    report = verify(Savepoint.open(tmp_path / "sp"))
    assert [e for e in report.errors if "'unused' was replaced" in e] == report.errors and len(report.errors) == 1
    assert report.values > 0  # every chunk was still read and decoded


# --------------------------------------------------------------------------
# §2, §2.1: locations
# --------------------------------------------------------------------------


@pytest.mark.parametrize("plant", [lambda p: p.write_bytes(b"x"), os.mkfifo, lambda p: None],
                         ids=["file", "fifo", "missing"])
def test_a_location_that_is_no_directory_holds_no_savepoint(tmp_path, plant):
    plant(tmp_path / "sp")
    with pytest.raises(SavepointNotFoundError):
        Savepoint.open(tmp_path / "sp")


def _shallow(parent) -> None:
    write_seeds(parent / "base")
    rescale(parent / "base", parent / "sp", 3)


def _read_all(location) -> None:
    sp = Savepoint.open(location)
    for op in sp.operators:
        for name in op.keyed_state_names:
            list(op.keyed_state(name).items())


@pytest.mark.parametrize("spelling", ["trailing-slash", "dot", "link-elsewhere"])
def test_bases_resolve_beside_the_resolved_location(tmp_path, monkeypatch, spelling):
    """The parent of a savepoint is that of its resolved path: a trailing '/', '.', or a link
    in another directory name the same savepoint, whose bases are its real siblings."""
    _shallow(tmp_path / "runs")
    if spelling == "trailing-slash":
        location = f"{tmp_path / 'runs' / 'sp'}/"
    elif spelling == "dot":
        monkeypatch.chdir(tmp_path / "runs" / "sp")
        location = "."
    else:
        (tmp_path / "elsewhere").mkdir()
        os.symlink(tmp_path / "runs" / "sp", tmp_path / "elsewhere" / "current")
        location = tmp_path / "elsewhere" / "current"
    _read_all(location)
