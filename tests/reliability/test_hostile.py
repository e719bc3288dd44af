"""Hostile savepoints (spec/security.md): each is refused with a typed error, in
bounded time and bounded memory, and never makes the reader touch a file outside
the savepoint (or its sibling bases).

Every case is a manifest with a valid envelope and CRC32C (so the attack reaches
the checks behind it), written by hand rather than by the writer.
"""

from __future__ import annotations

import os
import struct
import time
import tracemalloc

import pytest

from pyref import CorruptSavepointError, SavepointError, rescale
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref._proto.savepoint.v1 import serializer_pb2
from pyref.checksum import crc32c
from pyref.manifest import DATA_FILE_MAGIC, decode_manifest, encode_envelope, encode_manifest
from pyref.serializers import Json, ListOf, MapOf, Protobuf, String, Tuple, serializer_from_snapshot
from pyref.serializers import Int64 as Int64Serializer
from pyref.testing import varint
from reliability_helpers import data_files, read_all, write_small

TIME_LIMIT_S = 2.0
MEMORY_LIMIT = 16 << 20


def bounded(fn, *args, memory: int = MEMORY_LIMIT, seconds: float = TIME_LIMIT_S):
    """Run ``fn``; it must raise a SavepointError within the time and traced-memory bounds."""
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(SavepointError) as info:
            fn(*args)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < seconds, f"took {elapsed:.2f} s"
    assert peak < memory, f"allocated {peak} bytes"
    return info.value


def manifest_of(path) -> pb.Manifest:
    with open(os.path.join(path, "_manifest"), "rb") as f:
        return decode_manifest(f.read(), path="x")[0]


def put_manifest(path, m: pb.Manifest) -> None:
    with open(os.path.join(path, "_manifest"), "wb") as f:
        f.write(encode_manifest(m))  # a valid envelope around whatever the attacker wants


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "sp"
    write_small(path)
    return path


def _chunks(m: pb.Manifest):
    return [c for op in m.operators for s in [*op.list_states, *op.keyed_states] for c in s.chunks]


# --------------------------------------------------------------------------
# Paths and symlinks
# --------------------------------------------------------------------------

ESCAPING_PATHS = ["../outside.svd", "/etc/passwd", "data/../../outside.svd", "data\\..\\..\\x.svd", "C:/x.svd",
                  "data//x.svd", "./data/x.svd", "data/x.svd\x00", "", "..", "data/./x.svd"]


@pytest.mark.parametrize("bad", ESCAPING_PATHS)
def test_data_file_paths_that_escape_are_refused_at_open(small, bad):
    m = manifest_of(small)
    m.data_files[0].path = bad
    put_manifest(small, m)
    err = bounded(read_all, small)
    assert isinstance(err, CorruptSavepointError) and "safe relative path" in str(err)


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "/abs", "a\\b", "", "x\x00", "c:"])
def test_base_directory_names_that_escape_are_refused(small, bad):
    m = manifest_of(small)
    m.required_features.append("external-bases")
    m.bases.add(directory=bad, savepoint_id="id")
    m.data_files[0].base = 1
    put_manifest(small, m)
    bounded(read_all, small)


def test_a_data_file_symlinked_outside_is_refused_even_with_valid_content(small, tmp_path):
    (name,) = data_files(small)
    outside = tmp_path / "outside.svd"
    os.rename(name, outside)  # byte-identical content: only the location is wrong
    os.symlink(outside, name)
    err = bounded(read_all, small)
    assert "outside the savepoint" in str(err)


def test_a_data_directory_symlinked_outside_is_refused(small, tmp_path):
    os.rename(small / "data", tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", small / "data")
    bounded(read_all, small)


def test_a_manifest_symlinked_outside_is_refused(small, tmp_path):
    os.rename(small / "_manifest", tmp_path / "m")
    os.symlink(tmp_path / "m", small / "_manifest")
    bounded(read_all, small)


def test_a_symlink_that_stays_inside_is_followed(small):
    (name,) = data_files(small)
    os.rename(name, small / "real.svd")
    os.symlink(small / "real.svd", name)
    read_all(small)


def test_a_fifo_or_directory_in_place_of_a_file_does_not_hang(small):
    (name,) = data_files(small)
    size = os.path.getsize(name)
    os.unlink(name)
    os.mkfifo(name)
    bounded(read_all, small)
    os.unlink(name)
    os.mkdir(name)
    bounded(read_all, small)
    os.rename(small / "_manifest", small / "m")
    os.mkfifo(small / "_manifest")
    bounded(read_all, small)  # the manifest itself a FIFO: no blocking open
    assert size


def test_paths_through_a_file_or_too_long_are_typed_errors(small):
    m = manifest_of(small)
    m.data_files[0].path = "_manifest/x.svd"  # a path through a regular file
    put_manifest(small, m)
    bounded(read_all, small)
    m.data_files[0].path = "data/" + "x" * 5000
    put_manifest(small, m)
    bounded(read_all, small)


def test_a_base_that_is_a_symlink_out_of_the_parent_directory_is_refused(tmp_path):
    parent = tmp_path / "savepoints"
    parent.mkdir()
    write_small(tmp_path / "victim")  # another directory holding a savepoint
    rescale(tmp_path / "victim", tmp_path / "shallow", 1)  # refers to the base "victim"
    os.rename(tmp_path / "shallow", parent / "shallow")
    os.symlink(tmp_path / "victim", parent / "victim")  # the base name now leads out of parent/
    err = bounded(read_all, parent / "shallow")
    assert "symlink" in str(err)


# --------------------------------------------------------------------------
# Decompression bombs
# --------------------------------------------------------------------------


def _zstd_chunk_state(path, stored: bytes, raw_length: int, rows: int = 1) -> None:
    """Replace the savepoint's first list-state chunk by an inline zstd chunk."""
    m = manifest_of(path)
    ls = m.operators[0].list_states[0]
    chunk = ls.chunks[0]
    chunk.ClearField("range")
    chunk.inline_data = stored
    chunk.codec = pb.ZSTD
    chunk.raw_length = raw_length
    chunk.row_count = rows
    chunk.crc32c = crc32c(stored)
    for p in ls.partitions:
        for r in p.ranges:
            if r.chunk == 0:
                r.first, r.count = 0, rows
    put_manifest(path, m)


def test_a_zstd_chunk_declaring_a_huge_raw_length_is_refused_before_allocating(small):
    import pyarrow as pa

    stored = pa.Codec("zstd").compress(b"\0" * 64, asbytes=True)
    _zstd_chunk_state(small, stored, 2**31 - 1)
    err = bounded(read_all, small, memory=1 << 20)
    assert "raw length" in str(err) or "expand" in str(err)


def test_a_zstd_frame_that_expands_beyond_its_raw_length_is_cut_off(small):
    import pyarrow as pa

    bomb = pa.Codec("zstd").compress(b"\0" * (256 << 20), asbytes=True)  # 256 MiB in ~8 KiB
    assert len(bomb) < 16 << 10
    _zstd_chunk_state(small, bomb, 64 << 10)  # declares 64 KiB
    err = bounded(read_all, small, memory=4 << 20)
    assert "zstd" in str(err)


def test_a_zstd_bomb_within_the_ratio_rule_stays_bounded_by_its_raw_length(small):
    """A frame that really expands 32000x is legal; the output is exactly raw_length."""
    import pyarrow as pa

    payload_rows = 1
    raw = 8 << 20
    payload = struct.pack("<II", payload_rows, 1) + struct.pack("<II", 0, raw - 16) + b"\0" * (raw - 16)
    stored = pa.Codec("zstd").compress(payload, asbytes=True)
    assert len(stored) * 1000 < raw
    _zstd_chunk_state(small, stored, raw, rows=payload_rows)
    # Decodes to one 8 MiB element that is not an int64: a typed error, after at most ~raw bytes.
    bounded(read_all, small, memory=4 * raw)


def test_garbage_in_a_zstd_chunk_is_a_typed_error(small):
    _zstd_chunk_state(small, b"\x28\xb5\x2f\xfd" + os.urandom(200), 1000)
    bounded(read_all, small)


# --------------------------------------------------------------------------
# Deep nesting
# --------------------------------------------------------------------------


def _deep_snapshot_bytes(depth: int, leaf: bytes = b"\x0a\x05int64\x10\x01") -> bytes:
    """SerializerSnapshot bytes nested ``depth`` levels through field 3 (nested), built
    from the inside out without recursion."""
    inner = leaf
    for _ in range(depth):
        inner = b"\x0a\x04list\x10\x01" + b"\x1a" + varint(len(inner)) + inner
    return inner


@pytest.mark.parametrize("depth", [33, 99, 101, 10_000])
def test_deeply_nested_serializer_snapshots_in_a_manifest_are_refused(small, depth):
    m = manifest_of(small)
    ls = m.operators[0].list_states[0]
    ls.element_serializer.Clear()
    body = bytearray(m.SerializeToString())
    # Splice the deep snapshot in as the element serializer, at the protobuf byte level.
    snap = _deep_snapshot_bytes(depth)
    op = m.operators[0]
    op_without = pb.Operator()
    op_without.CopyFrom(op)
    del op_without.list_states[0]
    ls_bytes = ls.SerializeToString() + b"\x1a" + varint(len(snap)) + snap
    op_bytes = op_without.SerializeToString() + b"\x32" + varint(len(ls_bytes)) + ls_bytes
    rest = pb.Manifest()
    rest.CopyFrom(m)
    del rest.operators[0]
    body = rest.SerializeToString() + b"\x42" + varint(len(op_bytes)) + op_bytes
    with open(small / "_manifest", "wb") as f:
        f.write(encode_envelope(body, 1, 0))
    err = bounded(read_all, small, memory=MEMORY_LIMIT + 64 * len(body))
    assert "nest" in str(err) or "protobuf" in str(err)


def test_a_deep_snapshot_built_in_memory_is_refused_without_recursion():
    root = serializer_pb2.SerializerSnapshot(serializer_id="list", version=1)
    cur = root
    for _ in range(10_000):
        cur = cur.nested.add(serializer_id="list", version=1)
    cur.serializer_id = "int64"
    bounded(serializer_from_snapshot, root, memory=64 << 20)


def test_deeply_nested_values_are_typed_errors():
    bounded(Json().decode, b"[" * 100_000 + b"]" * 100_000, memory=64 << 20)
    bounded(Json().decode, b'{"a":' * 50_000 + b"1" + b"}" * 50_000, memory=64 << 20)
    # A recursive protobuf message nested 10 000 levels deep.
    recursive = Protobuf(serializer_pb2.SerializerSnapshot)
    value = _deep_snapshot_bytes(10_000)
    bounded(recursive.decode, value, memory=64 << 20)


def test_deeply_nested_protobuf_descriptors_are_refused(small):
    from google.protobuf import descriptor_pb2

    fds = descriptor_pb2.FileDescriptorSet()
    f = fds.file.add(name="deep.proto", package="deep", syntax="proto3")
    msg = f.message_type.add(name="M0")
    for i in range(1, 90):  # within protobuf's parse depth, beyond anything sane
        msg = msg.nested_type.add(name=f"M{i}")
    snap = serializer_pb2.SerializerSnapshot(serializer_id="protobuf", version=1)
    snap.protobuf.file_descriptor_set.CopyFrom(fds)
    snap.protobuf.message_name = "deep.Missing"
    bounded(serializer_from_snapshot, snap, memory=64 << 20)


# --------------------------------------------------------------------------
# Huge counts and lengths
# --------------------------------------------------------------------------


def test_a_huge_row_count_is_refused_at_open(small):
    m = manifest_of(small)
    for c in _chunks(m):
        c.row_count = 2**32 - 1
    put_manifest(small, m)
    err = bounded(read_all, small)
    assert "cannot hold" in str(err)


def test_a_huge_declared_file_size_and_range_is_refused_before_reading(small):
    m = manifest_of(small)
    m.data_files[0].size = 2**63
    c = next(c for c in _chunks(m) if c.WhichOneof("location") == "range")  # one: chunks must not overlap (C6)
    c.range.offset = 2**62
    c.range.length = 2**31 - 1
    c.raw_length = 2**31 - 1
    c.codec = pb.NONE
    put_manifest(small, m)
    err = bounded(read_all, small)
    assert "bytes, manifest says" in str(err)


def test_partition_ranges_beyond_their_chunk_are_refused(small):
    m = manifest_of(small)
    m.operators[0].list_states[0].partitions[0].ranges[0].count = 2**32 - 1
    put_manifest(small, m)
    bounded(read_all, small)


def test_payload_offsets_that_lie_are_refused(small):
    m = manifest_of(small)
    ls = m.operators[0].list_states[0]
    rows = ls.chunks[0].row_count
    # Offsets point far past the data; the payload is otherwise well formed.
    offsets = [0] + [2**32 - 1] * rows
    payload = struct.pack("<II", rows, 1) + struct.pack(f"<{rows + 1}I", *offsets) + b"\0" * 8
    c = ls.chunks[0]
    c.ClearField("range")
    c.inline_data, c.codec, c.raw_length, c.crc32c = payload, pb.NONE, len(payload), crc32c(payload)
    put_manifest(small, m)
    err = bounded(read_all, small)
    assert "malformed chunk payload" in str(err)


@pytest.mark.parametrize("serializer,data", [
    (ListOf(Int64Serializer()), struct.pack("<I", 2**32 - 1)),
    (ListOf(String()), struct.pack("<I", 2**32 - 1) + b"\0" * 16),
    (MapOf(String(), Int64Serializer()), struct.pack("<I", 2**32 - 1) + b"\0" * 64),
    (Tuple(String(), String()), struct.pack("<I", 2**32 - 1) + b"abc"),
    (ListOf(ListOf(ListOf(String()))), struct.pack("<III", 1, 4, 2**31) + b"\0" * 8),
])
def test_huge_counts_and_lengths_in_values_are_refused_before_allocating(serializer, data):
    bounded(serializer.decode, data, memory=1 << 20)


def test_a_tuple_snapshot_with_too_many_fields_is_refused():
    snap = serializer_pb2.SerializerSnapshot(serializer_id="tuple", version=1)
    for _ in range(5_000):
        snap.nested.add(serializer_id="int64", version=1)
    bounded(serializer_from_snapshot, snap, memory=64 << 20)


def test_unknown_serializer_ids_load_no_code(small):
    """A savepoint names classes only through the registry: 'os.system' is just an unknown id."""
    m = manifest_of(small)
    m.operators[0].list_states[0].element_serializer.serializer_id = "os.system"
    put_manifest(small, m)
    err = bounded(read_all, small)
    assert "not registered" in str(err)


def test_the_data_file_magic_is_checked_by_reads_and_verify(small):
    from pyref import Savepoint
    from pyref.inspection import verify

    (name,) = data_files(small)
    with open(name, "r+b") as f:
        f.write(b"\0" * len(DATA_FILE_MAGIC))
    err = bounded(read_all, small)  # every read checks it before using the file (spec/format.md §6.3)
    assert isinstance(err, CorruptSavepointError) and "magic" in str(err)
    assert any("magic" in e for e in verify(Savepoint.open(small)).errors)
