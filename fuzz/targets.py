"""Fuzz targets: turn arbitrary bytes into reader input and read it all.

Every target is a function ``target(data: bytes) -> None`` that feeds ``data`` to
one decoding surface of pyref. The only exceptions a target may let out are
:class:`pyref.SavepointError` subclasses (the typed errors); anything else
(IndexError, struct.error, MemoryError, RecursionError, protobuf errors...) is
a bug. :func:`run_one` also enforces the resource bounds of spec/security.md:
a per-input time limit and a traced-allocation peak proportional to the input.

Targets
    manifest     pyref.manifest.decode_manifest (envelope, protobuf body, validation)
    chunk        one chunk: manifest rules, decompression, payload decoding, value decoding
    serializer   SerializerSnapshot restoring, value decoding, compatibility resolution
    savepoint    a savepoint directory (and sibling bases) materialised from the input,
                 opened and read in full: every state, verify, describe, restore plans
    operations   writes, rescales, cleans, links, planted locks and faults on a tree of
                 savepoints, checked against a model (fuzz/operations.py)
    flink        a Flink savepoint directory (_metadata, state files, planted links) materialised
                 from the input: inspected, verified, every state read, restore plans, imported

Input layouts are documented on each ``*_input`` builder; ``fuzz/seeds.py`` makes
the committed seed corpus with them from real savepoints.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from google.protobuf.message import DecodeError

from pyref import codecs as _codecs
from pyref import reader as _reader
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref._proto.savepoint.v1 import serializer_pb2
from pyref.checksum import crc32c
from pyref.errors import SavepointError
from pyref.flink import compression as _flink_compression
from pyref.flink import operator_state as _flink_operator_state
from pyref.flink.handles import CHECKPOINT_SIBLINGS, LocalHandleStore
from pyref.flink.importer import import_flink
from pyref.flink.inspection import describe_flink, verify_flink
from pyref.flink.rocksdb import sst as _sst
from pyref.flink.savepoint import FlinkSavepoint
from pyref.flink.sources import source_splits
from pyref.inspection import describe, verify
from pyref.io import LocalIO
from pyref.manifest import ENVELOPE_OVERHEAD, decode_manifest, encode_envelope, encode_manifest, validate_manifest
from pyref.reader import Savepoint
from pyref.serializers import (
    Boolean,
    Bytes,
    Float64,
    Int32,
    Int64,
    Json,
    ListOf,
    MapOf,
    Nullable,
    Protobuf,
    String,
    Tuple,
    resolve_compatibility,
    serializer_from_snapshot,
)
from pyref.ttl import TtlConfig

from .operations import target_operations as run_operations

TARGETS = ("manifest", "chunk", "serializer", "savepoint", "operations", "flink")

#: Resource bounds per input (spec/security.md §"Bounded allocation"). The time is the process's
#: CPU time: the work an input costs, not how busy the machine is (libFuzzer's -timeout catches hangs).
TIME_LIMIT_S = 10.0
BASE_BYTES = 8 << 20
BYTES_PER_INPUT_BYTE = 64
#: Decoded values cost a few times their payload (Python objects, Arrow arrays).
BYTES_PER_EXPANDED_BYTE = 64


class BoundExceeded(AssertionError):
    """An input broke a resource bound: a finding, like an untyped exception."""


#: How often one input of the savepoint target (:func:`read_everything`, a few passes over
#: every state) may decompress one stored byte range of a data file; more means a manifest multiplied
#: the work per stored byte (spec/format.md §5.9: chunk entries sharing a range, or a
#: chunk decoded once per range of a partition).
DECOMPRESSIONS_PER_RANGE = 32


class _Accounting:
    """Bytes that decompression legitimately added (raw_length - stored length), and how
    often each stored range ("file@offset", length) was decompressed while an input runs
    (None outside :func:`run_one`: this module patches pyref for the whole process)."""

    expanded = 0
    decompressions: dict[tuple[str, int], int] | None = None


def _counting_decompress(codec, stored, raw_length, **kw):
    out = _original_decompress(codec, stored, raw_length, **kw)
    # Only reached when the core accepted raw_length: check its ratio rule held.
    if codec == _codecs.Codec.ZSTD and raw_length > _codecs.MAX_ZSTD_RATIO * len(stored):
        raise BoundExceeded(f"zstd chunk expanded {len(stored)} -> {raw_length} bytes, beyond the ratio bound")
    _Accounting.expanded += max(0, raw_length - len(stored))
    where = kw.get("path") or ""
    if _Accounting.decompressions is not None and "@" in where:  # a data file's range; inline bytes are input
        key = (where, len(stored))
        count = _Accounting.decompressions[key] = _Accounting.decompressions.get(key, 0) + 1
        if count > DECOMPRESSIONS_PER_RANGE:
            raise BoundExceeded(f"stored bytes {where} (+{len(stored)}) decompressed {count} times: work per stored "
                                "byte is not bounded (spec/format.md §5.9)")
    return out


_original_decompress = _reader.decompress
_reader.decompress = _counting_decompress


def _counting_snappy(data, start: int, end: int, **kw):
    """Flink's snapshot compression: what it adds counts like zstd's (its ratio is bounded by
    the Snappy format itself, spec/security.md §5.1)."""
    out, index = _original_snappy(data, start, end, **kw)
    _Accounting.expanded += max(0, len(out) - (end - start))
    return out, index


_original_snappy = _flink_compression.decode_framed_indexed
# decode_framed calls it through the module; operator_state imported the name.
_flink_compression.decode_framed_indexed = _flink_operator_state.decode_framed_indexed = _counting_snappy


def _counting_sst_block(reader, raw: bytes, kind: int, offset: int, what: str) -> bytes:
    """An SST block's decompression (Snappy, LZ4, zstd: each format bounds its own ratio) counts like zstd's."""
    out = _original_sst_block(reader, raw, kind, offset, what)
    _Accounting.expanded += max(0, len(out) - len(raw))
    return out


_original_sst_block = _sst._Reader.decompress
_sst._Reader.decompress = _counting_sst_block  # type: ignore[method-assign]

if not os.environ.get("PYREF_FUZZ_THREADS"):
    # A thread pool per read costs more than the tiny reads themselves; the
    # error paths are the same with one worker. PYREF_FUZZ_THREADS=1 keeps them.
    from pyref import parallel as _parallel

    _parallel.ordered_map.__kwdefaults__ = {**_parallel.ordered_map.__kwdefaults__, "workers": 1}


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out

    def u8(self) -> int:
        b = self.take(1)
        return b[0] if b else 0

    def u16(self) -> int:
        b = self.take(2).ljust(2, b"\0")
        return struct.unpack("<H", b)[0]

    def u32(self) -> int:
        b = self.take(4).ljust(4, b"\0")
        return struct.unpack("<I", b)[0]

    def rest(self) -> bytes:
        return self.take(len(self.data))


def _guard(fn, *args) -> None:
    """Call ``fn``; a typed error is a correct refusal, so go on with the next step."""
    try:
        result = fn(*args)
        if hasattr(result, "__next__"):
            for _ in result:
                pass
    except SavepointError:
        pass


# --------------------------------------------------------------------------
# manifest
# --------------------------------------------------------------------------


def manifest_input(envelope_bytes: bytes, *, fix: bool) -> bytes:
    """Layout: u8 flags, then the ``_manifest`` bytes. With flag bit 0 the bytes
    after the flags are an envelope *body* and the harness wraps it in a valid
    envelope (so mutations reach protobuf parsing and validation, not only the CRC)."""
    if fix:
        return bytes([1]) + envelope_bytes[16:-4]
    return bytes([0]) + envelope_bytes


def target_manifest(data: bytes) -> None:
    if not data:
        return
    flags, rest = data[0], data[1:]
    if flags & 1:
        rest = encode_envelope(rest, 1, (flags >> 1) & 3)
    try:
        manifest, _ = decode_manifest(rest, path="fuzz/_manifest")
    except SavepointError:
        return
    # Whatever validation accepted must re-encode and decode to the same manifest.
    again, _ = decode_manifest(encode_manifest(manifest), path="fuzz/_manifest")
    if again != manifest:
        raise AssertionError("a validated manifest does not survive re-encoding")


# --------------------------------------------------------------------------
# chunk
# --------------------------------------------------------------------------

#: Value serializers the chunk target decodes payload columns with.
CHUNK_SERIALIZERS = (
    Int64(), String(), Bytes(), Int32(), Float64(), Boolean(), Json(),
    ListOf(Int64()), MapOf(String(), Int64()), Nullable(String()), Tuple(Int64(), String()),
    ListOf(Tuple(String(), Nullable(Float64()))), Tuple(Int32(), Float64(), names=("a", "b")),
    ListOf(Boolean()), MapOf(String(), Bytes()), Protobuf(pb.ElementRange),
)
#: Key serializers (keyed shapes): keys hash through them, so only hashable ones.
KEY_SERIALIZERS = (String(), Int64(), Tuple(String(), Int32()), Int32(), Bytes(), Boolean())
#: State shapes: (list state?, keyed kind, columns)
_SHAPES = ((True, None, 1), (False, pb.VALUE, 2), (False, pb.MAP, 3), (False, pb.LIST, 2))


def chunk_input(stored: bytes, *, codec: int, shape: int, rows: int, raw_length: int, serializer: int,
                key: int = 0, user_key: int = 1) -> bytes:
    """Layout: u8 codec, u8 shape (0 list, 1 value, 2 map, 3 keyed list), u32 row_count,
    u32 raw_length, u8 value serializer index (CHUNK_SERIALIZERS), u8 key serializer index
    (KEY_SERIALIZERS, low nibble) and user-key index (high nibble), then the chunk's stored
    bytes (inline, with a correct CRC32C: the CRC is not what this target explores)."""
    return struct.pack("<BBIIBB", codec, shape, rows, raw_length, serializer, key | user_key << 4) + stored


def _manifest_with(chunk: pb.Chunk, shape: int, value: pb.SerializerSnapshot, key: pb.SerializerSnapshot,
                   user_key: pb.SerializerSnapshot) -> pb.Manifest:
    m = pb.Manifest(savepoint_id="fuzz")
    is_list, kind, _ = _SHAPES[shape]
    op = m.operators.add(operator_id="op", parallelism=1, max_parallelism=128)
    if is_list:
        ls = op.list_states.add(name="s", mode=pb.SPLIT_DISTRIBUTE, element_serializer=value)
        ls.chunks.append(chunk)
        if chunk.row_count:
            ls.partitions.add().ranges.add(chunk=0, first=0, count=chunk.row_count)
        else:
            ls.partitions.add()
    else:
        op.key_serializer.CopyFrom(key)
        ks = op.keyed_states.add(name="s", kind=kind, value_serializer=value)
        if kind == pb.MAP:
            ks.user_key_serializer.CopyFrom(user_key)
        ks.chunks.append(chunk)
    return m


def target_chunk(data: bytes) -> None:
    c = _Cursor(data)
    codec, shape, rows, raw_length, ser, keys = c.u8(), c.u8() % 4, c.u32(), c.u32(), c.u8(), c.u8()
    stored = c.rest()
    chunk = pb.Chunk(row_count=rows, codec=codec % 3, raw_length=raw_length, inline_data=stored, crc32c=crc32c(stored))
    serializer = CHUNK_SERIALIZERS[ser % len(CHUNK_SERIALIZERS)]
    key = KEY_SERIALIZERS[(keys & 15) % len(KEY_SERIALIZERS)]
    user_key = KEY_SERIALIZERS[(keys >> 4) % len(KEY_SERIALIZERS)]
    m = _manifest_with(chunk, shape, serializer.snapshot(), key.snapshot(), user_key.snapshot())
    try:
        validate_manifest(m, path="fuzz/_manifest")
    except SavepointError:
        # Also exercise the decoder below the manifest rules, as a reader of a
        # hand-made manifest would (decompress keeps its own bounds).
        if raw_length > 4 * len(stored) + (1 << 16):
            return
    sp = Savepoint(LocalIO(tempfile.gettempdir()), m, None)
    op = sp.operators[0]
    if shape == 0:
        view = op.list_state("s")
        _guard(lambda: list(view.partition(0)) if view.partition_count else None)
        _guard(lambda: view.arrow_ranges(view.proto.partitions[0].ranges))
    else:
        view = op.keyed_state("s")
        _guard(_items_and_get, view)
        _guard(view.to_arrow)


# --------------------------------------------------------------------------
# serializer
# --------------------------------------------------------------------------

#: New serializers resolved against fuzzed snapshots.
CANDIDATES = (
    Int64(), Int32(), String(), Nullable(Int64()), ListOf(Int64()), MapOf(String(), Int64()),
    Tuple(Int64(), String()), Tuple(Int64(), String(), names=("a", "b")), Json(), Bytes(),
)


def serializer_input(snapshot: bytes, values: list[bytes], *, mode: int = 0xFF) -> bytes:
    """Layout: u16 snapshot length, SerializerSnapshot bytes, u8 mode (bit 0 decode each
    value, bit 1 decode_array, bit 2 resolve against candidate ``mode >> 4``, bit 3
    re-encode round trip), then values as (u16 length, bytes)*."""
    out = struct.pack("<H", len(snapshot)) + snapshot + bytes([mode])
    for v in values:
        out += struct.pack("<H", len(v)) + v
    return out


def target_serializer(data: bytes) -> None:
    c = _Cursor(data)
    snap_bytes = c.take(c.u16())
    mode = c.u8()
    values = []
    while c.pos < len(data):
        values.append(c.take(c.u16()))
    snapshot = serializer_pb2.SerializerSnapshot()
    try:
        snapshot.ParseFromString(snap_bytes)
    except DecodeError:
        return  # the manifest parser refuses these bytes before any serializer sees them
    if mode & 4:
        _guard(resolve_compatibility, snapshot, CANDIDATES[(mode >> 4) % len(CANDIDATES)])
    try:
        s = serializer_from_snapshot(snapshot)
    except SavepointError:
        return
    again = serializer_from_snapshot(s.snapshot())
    if again != s:
        raise AssertionError("a restored serializer does not survive its own snapshot")
    if mode & 1:
        for v in values:
            try:
                decoded = s.decode(v)
            except SavepointError:
                continue
            if mode & 8:
                try:
                    encoded = s.encode(decoded)
                except SavepointError:
                    continue  # e.g. JSON 1e400 decodes to inf, which JSON cannot encode
                if s.encode(s.decode(encoded)) != encoded:
                    raise AssertionError("encode(decode(encode(v))) differs from encode(v)")
    if mode & 2:
        _guard(s.decode_array, pa.array(values, type=pa.binary()))


# --------------------------------------------------------------------------
# savepoint
# --------------------------------------------------------------------------

_MAX_FILES = 16


#: Flag bit 3 appends this many chunk entries over one stored range, and ranges over rows
#: already selected, to every state (what rules C6 and L6 refuse).
SHARED_COPIES = 64
#: Flag bits 4 and 5 extend ``sp/_manifest``, or every data file, to these sizes: sparse
#: files, costing no memory or disk unless a reader reads them whole.
SPARSE_MANIFEST_BYTES = 64 << 30
SPARSE_DATA_BYTES = 8 << 30


def savepoint_input(files: dict[str, bytes], *, flags: int = 0) -> bytes:
    """Layout: u8 flags (bit 0 fix manifest envelopes, bit 1 fix chunk CRC32Cs from the
    files, bit 2 fix data file sizes, bit 3 share stored ranges and rows between chunk
    entries and element ranges, bit 4 make ``sp/_manifest`` a sparse file of 64 GiB, bit 5
    make every data file a sparse file of 8 GiB (and, with bit 2, its declared size too)),
    then files as (u16 name length, name, u32 length, bytes)*. Names are relative to a
    scratch directory; the savepoint opened is ``sp``, other top-level directories serve
    as its bases."""
    out = bytes([flags])
    for name, content in files.items():
        n = name.encode()
        out += struct.pack("<H", len(n)) + n + struct.pack("<I", len(content)) + content
    return out


def _safe_name(name: str) -> bool:
    parts = name.split("/")
    # 96: the directory of a file-merging checkpoint's merged files (shared/job_<id>_op_<id>_<i>_<n>) is 77.
    return (0 < len(parts) <= 3 and all(p and p not in (".", "..") and len(p) <= 96 for p in parts)
            and all(ch.isalnum() or ch in "._-/" for ch in name) and name.isascii())


def _parse_files(data: bytes, max_files: int = _MAX_FILES) -> tuple[int, dict[str, bytes]]:
    c = _Cursor(data)
    flags = c.u8()
    files: dict[str, bytes] = {}
    while c.pos < len(data) and len(files) < max_files:
        try:
            name = c.take(c.u16()).decode("ascii")
        except UnicodeDecodeError:
            name = ""
        content = c.take(c.u32())
        if _safe_name(name):
            files[name] = content
    return flags, files


def _fix(files: dict[str, bytes], flags: int) -> None:
    """Repair what a mutation breaks first, so the input reaches deeper checks."""
    for name in [n for n in files if n.endswith("/_manifest") and n.count("/") == 1]:
        directory = name.split("/")[0]
        data = files[name]
        if len(data) < ENVELOPE_OVERHEAD:
            continue
        body = data[16:-4]
        if flags & 14:
            m = pb.Manifest()
            try:
                m.ParseFromString(body)
            except DecodeError:
                m = None
            if m is not None:
                if flags & 8:
                    _share(m)
                _fix_chunks(files, directory, m, flags)
                body = m.SerializeToString()
        major, minor = struct.unpack_from("<HH", data, 8)
        files[name] = encode_envelope(body, major, minor)


def _fix_chunks(files: dict[str, bytes], directory: str, m: pb.Manifest, flags: int) -> None:
    def content(index: int) -> bytes | None:
        if index >= len(m.data_files):
            return None
        f = m.data_files[index]
        where = directory if f.base == 0 else (m.bases[f.base - 1].directory if f.base <= len(m.bases) else None)
        return files.get(f"{where}/{f.path}") if where else None

    if flags & 4:
        for i, f in enumerate(m.data_files):
            c = content(i)
            if c is not None:
                f.size = SPARSE_DATA_BYTES if flags & 32 else len(c)
    if flags & 2:
        for op in m.operators:
            chunks = [ch for st in [*op.list_states, *op.keyed_states, *op.timer_services, *op.broadcast_states]
                      for ch in st.chunks]
            for ch in [*chunks, *([op.coordinator_state] if op.HasField("coordinator_state") else [])]:
                if ch.WhichOneof("location") == "inline_data":
                    ch.crc32c = crc32c(ch.inline_data)
                elif ch.WhichOneof("location") == "range":
                    c = content(ch.range.file)
                    if c is not None:
                        ch.crc32c = crc32c(c[ch.range.offset:ch.range.offset + ch.range.length])


def _share(m: pb.Manifest) -> None:
    """Flag bit 3: every state and timer service gets more entries over its last chunk's
    stored bytes, every partition (list and broadcast state) selects its first rows again,
    and every operator's coordinator state is the first one's (rules C6 and L6 refuse all)."""
    coordinators = [op.coordinator_state for op in m.operators if op.HasField("coordinator_state")]
    for op in m.operators:
        for state in [*op.list_states, *op.keyed_states, *op.timer_services, *op.broadcast_states]:
            if state.chunks:
                state.chunks.extend([state.chunks[-1]] * SHARED_COPIES)
        for state in [*op.list_states, *op.broadcast_states]:
            for partition in state.partitions:
                if partition.ranges:
                    partition.ranges.extend([partition.ranges[0]] * SHARED_COPIES)
        if coordinators and op.coordinator_state != coordinators[0]:
            op.coordinator_state.CopyFrom(coordinators[0])


def _make_sparse(path: str, size: int) -> None:
    if os.path.isfile(path) and not os.path.islink(path):
        os.truncate(path, size)


def _items_and_get(view) -> None:
    first = None
    for item in view.items(with_ttl=view.ttl is not None):
        first = item if first is None else first
    if first is not None:
        view.get(first[0], **({"namespace": first[1]} if view.namespaced else {}))


def _read_1_2_parts(op) -> None:
    """Timers, broadcast maps and coordinator state (format 1.2)."""
    try:
        services = op.timer_services
    except SavepointError:
        services = []
    for service in services:
        _guard(lambda: list(service.timers()))
        _guard(service.to_arrow)
    for name in op.broadcast_state_names:
        try:
            view = op.broadcast_state(name)
        except SavepointError:
            continue
        _guard(lambda: list(view.partitions()))
    _guard(lambda: op.coordinator_state)
    _guard(source_splits, op)  # a FLIP-27 source's positions, if its states are a source's


def read_everything(path: str) -> None:
    """Open a savepoint and read all of it through every public read path."""
    sp = Savepoint.open(path)
    _guard(describe, sp)
    for op in sp.operators:
        for name in op.list_state_names:
            try:
                view = op.list_state(name)
            except SavepointError:
                continue
            for p in range(view.partition_count):
                _guard(view.partition, p)
                _guard(view.arrow_ranges, view.proto.partitions[p].ranges)
        for name in op.keyed_state_names:
            try:
                view = op.keyed_state(name)
            except SavepointError:
                continue
            _guard(_items_and_get, view)
            _guard(view.to_arrow)
        _read_1_2_parts(op)
    _guard(verify, sp)
    for op, sub in _restoring_subtasks(sp, "operator_id"):
        for name in op.list_state_names:
            _guard(sub.list_state, name)
        for name in op.keyed_state_names:
            _guard(sub.keyed_state, name)
        for name in op.broadcast_state_names:
            _guard(sub.broadcast_state, name)
        for service in op.proto.timer_services:
            _guard(lambda: list(sub.timers(service.name, service.domain)))
        _guard(sub.planned_bytes)


def _restoring_subtasks(sp, operator_key: str) -> Iterator[tuple[Any, Any]]:
    """(operator, new subtask) of the restore plans at parallelism 1 and 3, where they plan;
    ``operator_key`` is the operator attribute the plan names operators by."""
    for parallelism in (1, 3):
        try:
            plan = sp.restore_plan(parallelism)
        except SavepointError:
            continue
        for op in sp.operators:
            for sub in plan.subtasks(getattr(op, operator_key)):
                yield op, sub


_SCRATCH = None


def _scratch() -> str:
    global _SCRATCH
    if _SCRATCH is None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _SCRATCH = tempfile.mkdtemp(prefix="pyref-fuzz-", dir=base)
    return _SCRATCH


def _materialise(directory: str, files: dict[str, bytes], *, links: bool = False) -> str:
    """Write ``files`` under a fresh scratch ``directory`` (holding at least an empty
    ``sp``) and return it; with ``links`` a file named ``*.link`` becomes a symbolic
    link to its content."""
    root = os.path.join(_scratch(), directory)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "sp"))
    for name, content in files.items():
        full = os.path.join(root, *name.split("/"))
        try:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if links and name.endswith(".link"):
                target = content.decode("utf-8", "replace").replace("\0", "")
                if target:  # a link needs a target: an empty one stays unnamed
                    os.symlink(target, full)
                continue
            with open(full, "wb") as f:
                f.write(content)
        except (IsADirectoryError, NotADirectoryError, FileExistsError):
            continue  # "a" and "a/b" both named: keep the first
    return root


def target_savepoint(data: bytes) -> None:
    flags, files = _parse_files(data)
    if flags & 15:
        _fix(files, flags)
    root = _materialise("t", files)
    if flags & 16:
        _make_sparse(os.path.join(root, "sp", "_manifest"), SPARSE_MANIFEST_BYTES)
    if flags & 32:
        for name in files:
            if "/data/" in name:
                _make_sparse(os.path.join(root, *name.split("/")), SPARSE_DATA_BYTES)
    try:
        read_everything(os.path.join(root, "sp"))
    except SavepointError:
        pass


# --------------------------------------------------------------------------
# flink
# --------------------------------------------------------------------------

#: Flag bit 0 extends every state file to this size (sparse) and leaves the sizes
#: ``_metadata`` declares alone: a reader must read the handles' ranges, never whole files.
SPARSE_STATE_BYTES = 1 << 30
#: A Flink savepoint has a state file per subtask and operator: more than a pyref one.
_FLINK_MAX_FILES = 64
#: What the import is told about states under TTL (Flink does not store their TTL).
_FLINK_TTL = TtlConfig(60_000)


class PathEscape(AssertionError):
    """A Flink state handle resolved to a file outside the savepoint directory."""


def flink_input(files: dict[str, bytes], *, flags: int = 0) -> bytes:
    """The layout of :func:`savepoint_input`: names are relative to a scratch directory,
    the Flink savepoint is ``sp`` (``sp/_metadata`` and its state files) and other
    top-level directories lie outside it (what an escaping path could reach). Flag bit 0
    makes every state file (``sp``'s and the ``shared`` and ``taskowned`` ones of a checkpoint, a
    file merging's merged files among them) a sparse file of 1 GiB; with bit 1 a file named ``*.link``
    becomes a symbolic link to its content (a path)."""
    return savepoint_input(files, flags=flags)


def _confined_local_path(store: LocalHandleStore, handle) -> str:
    path = _original_local_path(store, handle)
    real = os.path.realpath(path)
    # This module patches pyref for the whole process: a caller that allowed external files keeps them.
    # A checkpoint's own shared and task-owned directories beside it are read too (pyref.flink.handles),
    # where they are links to directories beside it as well; a link out of the parent is refused there.
    parent = os.path.dirname(store.directory)
    siblings = [os.path.join(parent, d) for d in CHECKPOINT_SIBLINGS]
    allowed = [store.directory, *siblings,
               *(real_sibling for real_sibling in map(os.path.realpath, siblings)
                 if os.path.dirname(real_sibling) == parent)]
    if not store.allow_external_files and not any(os.path.commonpath([real, d]) == d for d in allowed):
        raise PathEscape(f"state handle {handle.location!r} opened {real}, outside {store.directory}")
    return path


_original_local_path = LocalHandleStore.local_path
LocalHandleStore.local_path = _confined_local_path  # type: ignore[method-assign]


def _read_flink_keyed(op, name: str) -> None:
    view = op.keyed_state(name)
    _guard(_first_item, view)
    _guard(view.to_arrow)
    _guard(view.check_key_groups)


def _first_item(view) -> None:
    first = next(view.items(with_ttl=True), None)
    if first is not None:
        view.get(first[0], namespace=first[1] if view.has_namespace else None)


def _names(op, attribute: str) -> list:
    """``op.list_state_names`` and the like, or none when reading them fails (typed)."""
    try:
        return getattr(op, attribute)
    except SavepointError:
        return []


def _read_flink_operator(op) -> None:
    """Every state of one operator through every view a user has."""
    _guard(op.source_coordinator_checkpoint)
    _guard(source_splits, op)
    for name in _names(op, "list_state_names"):
        _guard(lambda: op.list_state(name).elements())
        _guard(lambda: op.list_state(name).to_arrow())
    for name in _names(op, "broadcast_state_names"):
        _guard(lambda: [op.broadcast_state(name).to_dict(i) for i in range(op.parallelism)])
        _guard(lambda: op.broadcast_state(name).to_arrow())
    for name in _names(op, "keyed_state_names"):
        _guard(_read_flink_keyed, op, name)
    for service, domain in _names(op, "timer_services"):
        _guard(lambda: list(op.timers(service, domain).items()))
        _guard(lambda: op.timers(service, domain).to_arrow())
    _guard(op.keyed_subtasks, 256)  # small runs of key groups, as the import reads them


def read_flink(path: str, scratch: str) -> None:
    """Open a Flink savepoint and do all a user does with it: inspect and verify (their
    JSON), read every state, restore plans at 1 and 3, import it as a pyref savepoint."""
    with FlinkSavepoint.open(path) as sp:
        _guard(lambda: json.dumps(describe_flink(sp)))
        _guard(lambda: json.dumps(verify_flink(sp).to_dict()))
        for op in sp.operators:
            _read_flink_operator(op)
        for op, sub in _restoring_subtasks(sp, "name"):
            for name in _names(op, "list_state_names"):
                _guard(sub.list_state, name)
            for name in _names(op, "broadcast_state_names"):
                _guard(sub.broadcast_state, name)
            for name in _names(op, "keyed_state_names"):
                _guard(sub.keyed_rows, name)
            for service, domain in _names(op, "timer_services"):
                _guard(sub.timers, service, domain)
    target = os.path.join(scratch, "imported")
    try:
        import_flink(path, target, ttl_default=_FLINK_TTL, overwrite=True)
    except SavepointError:
        return
    # What the import committed is a pyref savepoint like any other: it must verify.
    report = verify(Savepoint.open(target))
    if not report.ok:
        raise AssertionError(f"import-flink committed a savepoint that does not verify: {report.errors[:3]}")


def target_flink(data: bytes) -> None:
    flags, files = _parse_files(data, _FLINK_MAX_FILES)
    root = _materialise("f", files, links=bool(flags & 2))
    if flags & 1:
        for name in files:
            # A checkpoint's shared and task-owned files too: a file merging's merged files are there.
            if name.split("/")[0] in ("sp", *CHECKPOINT_SIBLINGS) and name != "sp/_metadata":
                _make_sparse(os.path.join(root, *name.split("/")), SPARSE_STATE_BYTES)
    try:
        read_flink(os.path.join(root, "sp"), root)
    except SavepointError:
        pass


# --------------------------------------------------------------------------
# Running one input under the bounds
# --------------------------------------------------------------------------

def target_operations(data: bytes) -> None:
    run_operations(data, _scratch())


FUNCTIONS = {
    "manifest": target_manifest,
    "chunk": target_chunk,
    "serializer": target_serializer,
    "savepoint": target_savepoint,
    "operations": target_operations,
    "flink": target_flink,
}


def allowed_peak(size: int, expanded: int) -> int:
    return BASE_BYTES + BYTES_PER_INPUT_BYTE * size + BYTES_PER_EXPANDED_BYTE * expanded


_WARM: set[str] = set()


def warm_up(target: str) -> None:
    """Run the seeds once, unchecked: first calls import modules lazily (pyarrow imports
    pandas on first use, ~24 MB) and fill caches; that is not any input's doing. The libFuzzer
    entry point calls it before fuzzing, so that it does not count against the first input's
    time limit (under instrumentation the flink target's seeds take tens of seconds)."""
    _WARM.add(target)
    directory = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", target)
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        try:
            with open(os.path.join(directory, name), "rb") as f:
                FUNCTIONS[target](f.read())
        except Exception:  # noqa: BLE001 - a failing seed is reported when it runs as an input
            pass


def run_one(target: str, data: bytes, *, check_bounds: bool = True) -> None:
    """Run one input; raise on an untyped exception or a broken bound."""
    fn = FUNCTIONS[target]
    if not check_bounds:
        fn(data)
        return
    if target not in _WARM:
        warm_up(target)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        _Accounting.expanded = 0
        # Only the savepoint target reads one savepoint a fixed number of times (read_everything);
        # the operations target reads a tree again after every operation.
        _Accounting.decompressions = {} if target == "savepoint" else None
        t0 = time.process_time()
        with warnings.catch_warnings():
            # A numpy overflow or a similar warning on hostile input is a silent misread.
            warnings.simplefilter("error", RuntimeWarning)
            fn(data)
        elapsed = time.process_time() - t0
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        _Accounting.decompressions = None
        if started:
            tracemalloc.stop()
    if elapsed > TIME_LIMIT_S:
        raise BoundExceeded(f"{target}: input of {len(data)} bytes took {elapsed:.1f} s of CPU (limit {TIME_LIMIT_S} s)")
    limit = allowed_peak(len(data), _Accounting.expanded)
    if peak > limit:
        raise BoundExceeded(f"{target}: input of {len(data)} bytes (decompression added {_Accounting.expanded}) "
                            f"allocated a peak of {peak} bytes; bound {limit}")
