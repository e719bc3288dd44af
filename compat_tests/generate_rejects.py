"""Write the reject corpus and the forward-compatibility corpus.

    python -m compat_tests.generate_rejects            # all missing cases of both corpora
    python -m compat_tests.generate_rejects --list

``reject/<case>/``: a savepoint every reader must refuse, made by mutating a
valid savepoint (the manifest is re-encoded with a valid CRC32C wherever the
case is not about the checksum itself), with ``expected_error.json`` naming
the error category. ``forward/<case>/``: a savepoint from a "future" writer
of the same major version (unknown fields, unknown optional features, a newer
minor version) that every reader must restore, with ``expected.json``.

Like the goldens, cases are written once: an existing case directory is never
overwritten, new files are added to the corpus's ``SHA256SUMS``. Before a case
is kept, pyref must refuse it with the expected category (or, for forward
cases, read exactly ``expected.json``); otherwise the generator stops.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass

from compat_tests import FORWARD_DIR, REJECT_DIR
from compat_tests._build import (
    add_to_sums,
    command_line,
    corpus_files,
    envelope,
    fresh_dir,
    provenance,
    read_manifest,
    remove_lock,
    rescale_model,
    write_manifest,
    write_model,
)
from compat_tests.canonical import (
    KeyedModel,
    ListModel,
    OperatorModel,
    canonical_text,
    dump_savepoint,
    error_category,
    expected_from_model,
    first_difference,
)

SPLIT = 1
REJECT_PARALLELISMS = (1, 2)
FORWARD_PARALLELISMS = (1, 2, 3)


def _s():
    from pyref import serializers

    return serializers


def _pb():
    from pyref._proto.savepoint.v1 import manifest_pb2

    return manifest_pb2


def base_model() -> list[OperatorModel]:
    s = _s()
    return [
        OperatorModel("source", 2, 128, None, [ListModel("offsets", SPLIT, s.Int64(), [[1, 2, 3], [4, 5]])]),
        OperatorModel("counter", 2, 128, s.String(), [], [
            KeyedModel("count", "value", s.Int64(), [(f"key-{i}", i) for i in range(20)]),
            KeyedModel("text", "value", s.String(), [("doc", "lorem ipsum dolor sit amet " * 100)]),
            KeyedModel("tags", "map", s.Int32(), [("doc", "a", 1), ("doc", "b", 2)], user_key_serializer=s.String()),
        ]),
    ]


def write_base(path: pathlib.Path, **options) -> None:
    write_model(path, base_model(), inline_bytes=0, **options)


# --------------------------------------------------------------------------
# Mutation helpers
# --------------------------------------------------------------------------


class Savepoint:
    """A savepoint directory being mutated: its manifest, its data files."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.manifest, self.version = read_manifest(path)

    def op(self, operator_id: str):
        return next(o for o in self.manifest.operators if o.operator_id == operator_id)

    def keyed(self, name: str, operator_id: str = "counter"):
        return next(k for k in self.op(operator_id).keyed_states if k.name == name)

    def list_state(self, name: str = "offsets", operator_id: str = "source"):
        return next(ls for ls in self.op(operator_id).list_states if ls.name == name)

    def file_of(self, chunk) -> pathlib.Path:
        return self.path / self.manifest.data_files[chunk.range.file].path

    def save(self, minor: int | None = None) -> bytes:
        """Re-encode the manifest with a valid envelope and CRC (no validation: it is meant to be wrong).

        The envelope keeps the version the savepoint was labelled with unless ``minor`` is given."""
        return write_manifest(self.path, self.manifest, minor=self.version.minor if minor is None else minor,
                              validate=False)

    @property
    def manifest_file(self) -> pathlib.Path:
        return self.path / "_manifest"


def inline_chunk(payload: bytes, rows: int, key_group: int = 0, codec: int = 0, raw_length: int | None = None):
    from pyref.checksum import crc32c

    pb = _pb()
    return pb.Chunk(key_group=key_group, row_count=rows, inline_data=payload, codec=codec,
                    raw_length=len(payload) if raw_length is None else raw_length, crc32c=crc32c(payload))


def payload_of(columns: list[list[bytes]]) -> bytes:
    import pyarrow as pa

    from pyref.chunk import encode_chunk

    return encode_chunk([pa.array(c, type=pa.binary()) for c in columns])


def key_group_of(key: str, max_parallelism: int = 128) -> int:
    from pyref.key_groups import assign_to_key_group

    return assign_to_key_group(key, max_parallelism, "string")


def replace_values(sp: Savepoint, snapshot, values: list[bytes], state: str = "count") -> None:
    """Make counter/<state> hold ``values`` under key "doc" with the value serializer ``snapshot``."""
    ks = sp.keyed(state)
    ks.value_serializer.CopyFrom(snapshot)
    del ks.chunks[:]
    key = _s().String().encode("doc")
    ks.chunks.append(inline_chunk(payload_of([[key] * len(values), values]), len(values), key_group_of("doc")))


def snapshot(sid: str, version: int = 1, nested=(), **fields):
    from pyref._proto.savepoint.v1 import serializer_pb2

    return serializer_pb2.SerializerSnapshot(serializer_id=sid, version=version, nested=list(nested), **fields)


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


@dataclass
class RejectCase:
    name: str
    category: str
    breaks: str
    #: Mutates ``case_dir / "savepoint"`` (already a valid savepoint), may add siblings.
    mutate: Callable[[pathlib.Path], None]
    derived: bool = False  # the savepoint is a shallow rescale of case_dir/base


def manifest_case(name: str, category: str, breaks: str, change: Callable[[Savepoint], None], *,
                  derived: bool = False, minor: int | None = None) -> RejectCase:
    def mutate(case_dir: pathlib.Path) -> None:
        sp = Savepoint(case_dir / "savepoint")
        change(sp)
        sp.save(minor)

    return RejectCase(name, category, breaks, mutate, derived)


def bytes_case(name: str, category: str, breaks: str, change: Callable[[bytes], bytes]) -> RejectCase:
    def mutate(case_dir: pathlib.Path) -> None:
        f = case_dir / "savepoint" / "_manifest"
        f.write_bytes(change(f.read_bytes()))

    return RejectCase(name, category, breaks, mutate)


def _body(data: bytes) -> bytes:
    (n,) = struct.unpack_from("<I", data, 12)
    return data[16:16 + n]


def _flip(data: bytes, at: int) -> bytes:
    b = bytearray(data)
    b[at] ^= 0x01
    return bytes(b)


def _file_chunk(sp: Savepoint, state: str = "count"):
    return next(c for c in sp.keyed(state).chunks if c.WhichOneof("location") == "range")


def _escape_path(case_dir: pathlib.Path) -> None:
    sp = Savepoint(case_dir / "savepoint")
    f = sp.manifest.data_files[0]
    outside = case_dir / "escaped"
    outside.mkdir()
    name = f.path.rsplit("/", 1)[-1]
    shutil.copy(sp.path / f.path, outside / name)  # a naive reader would find valid data there
    f.path = f"../escaped/{name}"
    sp.save()


def _remove_data_file(case_dir: pathlib.Path) -> None:
    sp = Savepoint(case_dir / "savepoint")
    (sp.path / sp.manifest.data_files[0].path).unlink()


def _truncate_data_file(case_dir: pathlib.Path) -> None:
    sp = Savepoint(case_dir / "savepoint")
    f = sp.path / sp.manifest.data_files[0].path
    f.write_bytes(f.read_bytes()[:-3])


def _grow_data_file(case_dir: pathlib.Path) -> None:
    sp = Savepoint(case_dir / "savepoint")
    f = sp.path / sp.manifest.data_files[0].path
    f.write_bytes(f.read_bytes() + b"junk")


def _corrupt_chunk_bytes(case_dir: pathlib.Path) -> None:
    sp = Savepoint(case_dir / "savepoint")
    chunk = _file_chunk(sp)
    f = sp.file_of(chunk)
    data = bytearray(f.read_bytes())
    data[chunk.range.offset + chunk.range.length // 2] ^= 0x40
    f.write_bytes(bytes(data))


def _replace_base(case_dir: pathlib.Path) -> None:
    """The base was written again (a new savepoint id) after the shallow savepoint referred to it."""
    base = Savepoint(case_dir / "base")
    base.manifest.savepoint_id = "00000000-0000-4000-8000-000000000000"
    base.save()


def _change_base(case_dir: pathlib.Path, change: Callable) -> None:
    base = Savepoint(case_dir / "base")
    change(base.manifest)
    base.save()


def _remove_base(case_dir: pathlib.Path) -> None:
    shutil.rmtree(case_dir / "base")


def _inline(sp: Savepoint, state: str = "count"):
    """counter/<state>'s first chunk, moved inline (as it is stored)."""
    chunk = _file_chunk(sp, state)
    stored = sp.file_of(chunk).read_bytes()[chunk.range.offset:chunk.range.offset + chunk.range.length]
    chunk.inline_data = stored
    return chunk


def _payload_case(name: str, breaks: str, mutate_payload: Callable[[bytearray, int], None], *,
                  columns: int = 2, rows: int = 3, declared_rows: int | None = None) -> RejectCase:
    """counter/count holds one inline chunk whose payload is ``mutate_payload``-ed (CRC recomputed)."""

    def change(sp: Savepoint) -> None:
        s = _s()
        cols = [[s.String().encode("doc")] * rows, [s.Int64().encode(i) for i in range(rows)]]
        if columns == 3:
            cols.insert(1, [b"x"] * rows)
        payload = bytearray(payload_of(cols))
        mutate_payload(payload, rows)
        ks = sp.keyed("count")
        del ks.chunks[:]
        ks.chunks.append(inline_chunk(bytes(payload), rows if declared_rows is None else declared_rows,
                                      key_group_of("doc")))

    return manifest_case(name, "corrupt", breaks, change)


def _value_case(name: str, breaks: str, snap, values: list[bytes]) -> RejectCase:
    return manifest_case(name, "corrupt", breaks, lambda sp: replace_values(sp, snap, values))


def _nested(depth: int):
    snap = snapshot("int64")
    for _ in range(depth - 1):
        snap = snapshot("list", nested=[snap])
    return snap


def _protobuf_missing_message():
    from google.protobuf import descriptor_pb2

    from pyref._proto.savepoint.v1 import serializer_pb2

    fds = descriptor_pb2.FileDescriptorSet()
    fds.file.add(name="x.proto", package="x", syntax="proto3").message_type.add(name="Present")
    return snapshot("protobuf", protobuf=serializer_pb2.ProtobufMessageConfig(file_descriptor_set=fds,
                                                                              message_name="x.Absent"))


def _set(obj, **values):
    for k, v in values.items():
        setattr(obj, k, v)


def reject_cases() -> list[RejectCase]:
    u64 = 2**64 - 1
    string, int64 = snapshot("string"), snapshot("int64")
    cases = [
        # The envelope (spec/format.md §4).
        bytes_case("newer-major-version", "unsupported-version", "format major version 2 (a valid CRC)",
                   lambda d: envelope(_body(d), 2, 0)),
        bytes_case("newer-major-version-unreadable-body", "unsupported-version",
                   "format major version 2 whose body is not a v1 manifest: the version is checked first",
                   lambda d: envelope(b"\x00\xff future layout \xff", 2, 0)),
        bytes_case("manifest-bad-magic", "corrupt", "first magic byte changed", lambda d: _flip(d, 1)),
        bytes_case("manifest-empty", "corrupt", "a zero-length _manifest", lambda d: b""),
        bytes_case("manifest-truncated-header", "corrupt", "_manifest cut inside the 16-byte header",
                   lambda d: d[:14]),
        bytes_case("manifest-truncated", "corrupt", "_manifest cut in the middle of the body", lambda d: d[:len(d) // 2]),
        bytes_case("manifest-truncated-checksum", "corrupt", "_manifest lacks the last byte of its CRC",
                   lambda d: d[:-1]),
        bytes_case("manifest-trailing-bytes", "corrupt", "bytes after the CRC", lambda d: d + b"\x00"),
        bytes_case("manifest-length-huge", "corrupt", "body length 0xFFFFFFFF (CRC recomputed)",
                   lambda d: _recrc(d[:12] + b"\xff\xff\xff\xff" + d[16:-4])),
        bytes_case("manifest-bad-checksum", "corrupt", "one body byte changed, CRC32C kept",
                   lambda d: _flip(d, 20)),
        bytes_case("manifest-checksum-changed", "corrupt", "the stored CRC32C changed", lambda d: _flip(d, len(d) - 2)),
        bytes_case("manifest-body-not-protobuf", "corrupt", "the body is not a protobuf message (valid CRC)",
                   lambda d: envelope(b"\xff\xff\xff\xff\x0f", 1, 0)),
        RejectCase("no-manifest", "not-found", "a savepoint directory without _manifest (an uncommitted write)",
                   lambda c: (c / "savepoint" / "_manifest").unlink()),
        # Features and identity (§5, §9).
        manifest_case("unknown-required-feature", "unsupported-feature", "required feature 'x-time-travel'",
                      lambda sp: sp.manifest.required_features.append("x-time-travel")),
        manifest_case("unknown-required-feature-before-other-rules", "unsupported-feature",
                      "an unknown required feature in a manifest that also breaks other rules (empty savepoint_id, "
                      "duplicate operator ids): required features are checked first",
                      lambda sp: (sp.manifest.required_features.append("x-time-travel"),
                                  _set(sp.manifest, savepoint_id=""),
                                  _set(sp.manifest.operators[1], operator_id=sp.manifest.operators[0].operator_id))),
        manifest_case("no-savepoint-id", "corrupt", "empty savepoint_id",
                      lambda sp: _set(sp.manifest, savepoint_id="")),
        # Data files and paths (§6, §11).
        RejectCase("data-file-path-escapes-parent", "corrupt",
                   "data file path '../escaped/<name>' leaves the savepoint directory (a valid copy of the file "
                   "is there)", _escape_path),
        manifest_case("data-file-path-absolute", "corrupt", "absolute data file path",
                      lambda sp: _set(sp.manifest.data_files[0], path="/etc/passwd")),
        manifest_case("data-file-path-backslash", "corrupt", "data file path with a backslash",
                      lambda sp: _set(sp.manifest.data_files[0], path="data\\..\\..\\x.svd")),
        manifest_case("data-file-path-dot-segment", "corrupt", "data file path with a '.' segment",
                      lambda sp: _set(sp.manifest.data_files[0], path="data/./" +
                                      sp.manifest.data_files[0].path.split("/")[-1])),
        manifest_case("data-file-path-empty-segment", "corrupt", "data file path with an empty segment",
                      lambda sp: _set(sp.manifest.data_files[0], path="data//" +
                                      sp.manifest.data_files[0].path.split("/")[-1])),
        manifest_case("data-file-listed-twice", "corrupt", "the same data file listed twice",
                      lambda sp: sp.manifest.data_files.add().CopyFrom(sp.manifest.data_files[0])),
        RejectCase("data-file-missing", "corrupt", "a listed data file does not exist", _remove_data_file),
        RejectCase("data-file-shorter-than-listed", "corrupt", "data file 3 bytes shorter than its listed size",
                   _truncate_data_file),
        RejectCase("data-file-longer-than-listed", "corrupt", "data file 4 bytes longer than its listed size",
                   _grow_data_file),
        manifest_case("data-file-names-missing-base", "corrupt", "data file of base 3 but there are no bases",
                      lambda sp: _set(sp.manifest.data_files[0], base=3)),
        # Bases (§8).
        manifest_case("bases-without-external-bases-feature", "corrupt",
                      "bases listed but 'external-bases' is not a required feature",
                      lambda sp: sp.manifest.required_features.remove("external-bases"), derived=True),
        manifest_case("base-directory-escapes", "corrupt", "base directory '../base'",
                      lambda sp: _set(sp.manifest.bases[0], directory="../base"), derived=True),
        manifest_case("base-directory-dot-dot", "corrupt", "base directory '..'",
                      lambda sp: _set(sp.manifest.bases[0], directory=".."), derived=True),
        manifest_case("base-listed-twice", "corrupt", "the same base listed twice",
                      lambda sp: sp.manifest.bases.add().CopyFrom(sp.manifest.bases[0]), derived=True),
        RejectCase("base-savepoint-replaced", "corrupt",
                   "the base directory now holds another savepoint (different savepoint_id)", _replace_base,
                   derived=True),
        RejectCase("base-savepoint-missing", "corrupt", "the base directory is gone", _remove_base, derived=True),
        manifest_case("base-is-own-directory", "corrupt", "the savepoint lists its own directory as a base",
                      lambda sp: _set(sp.manifest.bases[0], directory="savepoint"), derived=True),
        RejectCase("base-requires-unknown-feature", "unsupported-feature",
                   "the base's manifest requires an unknown feature (a base is opened with the full rules)",
                   lambda c: _change_base(c, lambda m: m.required_features.append("x-time-travel")), derived=True),
        RejectCase("base-manifest-bad-checksum", "corrupt", "the base's _manifest has a bad CRC32C",
                   lambda c: (c / "base" / "_manifest").write_bytes(_flip((c / "base" / "_manifest").read_bytes(),
                                                                            20)), derived=True),
        # Operators (§5.2).
        manifest_case("duplicate-operator-ids", "corrupt", "two operators with the same id",
                      lambda sp: _set(sp.manifest.operators[1], operator_id=sp.manifest.operators[0].operator_id)),
        manifest_case("empty-operator-id", "corrupt", "empty operator id",
                      lambda sp: _set(sp.op("source"), operator_id="")),
        manifest_case("parallelism-zero", "corrupt", "parallelism 0",
                      lambda sp: _set(sp.op("counter"), parallelism=0)),
        manifest_case("parallelism-exceeds-max-parallelism", "corrupt", "parallelism 129 > max parallelism 128",
                      lambda sp: _set(sp.op("counter"), parallelism=129)),
        manifest_case("max-parallelism-too-large", "corrupt", "max parallelism 32769 (> 2^15)",
                      lambda sp: _set(sp.op("counter"), max_parallelism=32769)),
        manifest_case("missing-key-serializer", "corrupt", "keyed states without a key serializer",
                      lambda sp: sp.op("counter").ClearField("key_serializer")),
        manifest_case("key-serializer-without-keyed-state", "corrupt", "a key serializer on an operator without "
                      "keyed state", lambda sp: sp.op("source").key_serializer.CopyFrom(string)),
        # States (§5.3, §5.4).
        manifest_case("duplicate-state-names", "corrupt", "two list states with the same name",
                      lambda sp: sp.op("source").list_states.add().CopyFrom(sp.list_state())),
        manifest_case("duplicate-state-names-list-and-keyed", "corrupt",
                      "a list state and a keyed state with the same name",
                      lambda sp: _set(sp.keyed("count"), name=_move_list_state(sp))),
        manifest_case("empty-state-name", "corrupt", "empty state name", lambda sp: _set(sp.keyed("count"), name="")),
        manifest_case("distribution-mode-unspecified", "corrupt", "list state mode DISTRIBUTION_MODE_UNSPECIFIED",
                      lambda sp: _set(sp.list_state(), mode=0)),
        manifest_case("unknown-distribution-mode", "unsupported-feature", "list state mode 7",
                      lambda sp: _set(sp.list_state(), mode=7)),
        manifest_case("list-state-without-element-serializer", "corrupt", "no element serializer",
                      lambda sp: sp.list_state().ClearField("element_serializer")),
        manifest_case("partition-count-mismatch", "corrupt", "1 partition for parallelism 2 (SPLIT_DISTRIBUTE)",
                      lambda sp: sp.list_state().partitions.pop()),
        manifest_case("partition-refers-to-missing-chunk", "corrupt", "element range of chunk 5 of 2",
                      lambda sp: _set(sp.list_state().partitions[0].ranges[0], chunk=5)),
        manifest_case("partition-range-outside-chunk", "corrupt", "element range 1+3 of a 3-row chunk",
                      lambda sp: _set(sp.list_state().partitions[0].ranges[0], first=1)),
        manifest_case("partition-range-empty", "corrupt", "element range with count 0",
                      lambda sp: _set(sp.list_state().partitions[0].ranges[0], count=0)),
        manifest_case("partition-range-count-huge", "corrupt", "element range count 2^32-1",
                      lambda sp: _set(sp.list_state().partitions[0].ranges[0], count=2**32 - 1)),
        manifest_case("keyed-state-kind-unspecified", "corrupt", "keyed state kind KEYED_STATE_KIND_UNSPECIFIED",
                      lambda sp: _set(sp.keyed("count"), kind=0)),
        manifest_case("unknown-keyed-state-kind", "unsupported-feature", "keyed state kind 9",
                      lambda sp: _set(sp.keyed("count"), kind=9)),
        manifest_case("keyed-state-without-value-serializer", "corrupt", "no value serializer",
                      lambda sp: sp.keyed("count").ClearField("value_serializer")),
        manifest_case("map-state-without-user-key-serializer", "corrupt", "MAP state without user-key serializer",
                      lambda sp: sp.keyed("tags").ClearField("user_key_serializer")),
        manifest_case("value-state-with-user-key-serializer", "corrupt", "VALUE state with a user-key serializer",
                      lambda sp: sp.keyed("count").user_key_serializer.CopyFrom(string)),
        # Chunks (§7).
        manifest_case("key-group-out-of-range", "corrupt", "chunk of key group 128 at max parallelism 128",
                      lambda sp: _set(sp.keyed("count").chunks[-1], key_group=128)),
        manifest_case("key-groups-not-ordered", "corrupt", "key-group chunks in descending order",
                      lambda sp: _reverse_chunks(sp.keyed("count"))),
        manifest_case("list-chunk-with-key-group", "corrupt", "a list chunk with key group 3",
                      lambda sp: _set(sp.list_state().chunks[0], key_group=3)),
        manifest_case("chunk-without-location", "corrupt", "a chunk with neither a file range nor inline data",
                      lambda sp: sp.keyed("count").chunks[0].ClearField("range")),
        manifest_case("chunk-refers-to-missing-data-file", "corrupt", "file range of data file 7 of 1",
                      lambda sp: _set(_file_chunk(sp).range, file=7)),
        manifest_case("chunk-offset-past-end-of-file", "corrupt", "chunk offset = the data file's size",
                      lambda sp: _set(_file_chunk(sp).range, offset=sp.manifest.data_files[0].size)),
        manifest_case("chunk-length-past-end-of-file", "corrupt", "chunk length = the data file's size",
                      lambda sp: _set(_file_chunk(sp).range, length=sp.manifest.data_files[0].size)),
        manifest_case("chunk-offset-inside-file-header", "corrupt", "chunk offset 0 (inside the data file magic)",
                      lambda sp: _set(_file_chunk(sp).range, offset=0)),
        manifest_case("chunk-length-negative", "corrupt", "chunk length 2^64-1 (-1 as a signed 64-bit integer)",
                      lambda sp: _set(_file_chunk(sp).range, length=u64)),
        manifest_case("chunk-offset-negative", "corrupt",
                      "chunk offset 2^64-8 (-8 as a signed 64-bit integer; offset + length wraps around)",
                      lambda sp: _set(_file_chunk(sp).range, offset=2**64 - 8)),
        manifest_case("chunk-raw-length-huge", "corrupt", "raw length 2^63",
                      lambda sp: _set(_file_chunk(sp, "text"), raw_length=2**63)),
        manifest_case("chunk-raw-length-negative", "corrupt", "raw length 2^64-1 (-1 as a signed 64-bit integer)",
                      lambda sp: _set(_file_chunk(sp, "text"), raw_length=u64)),
        manifest_case("chunk-row-count-huge", "corrupt", "row count 2^32-1 in a small chunk",
                      lambda sp: _set(sp.list_state().chunks[0], row_count=2**32 - 1)),
        manifest_case("uncompressed-chunk-length-mismatch", "corrupt",
                      "codec NONE chunk whose raw length differs from its stored length",
                      lambda sp: _set(_file_chunk(sp), raw_length=_file_chunk(sp).range.length + 1)),
        manifest_case("unknown-codec", "unsupported-feature", "chunk codec 9",
                      lambda sp: _set(sp.keyed("count").chunks[0], codec=9)),
        RejectCase("chunk-bad-checksum", "corrupt", "one byte of a chunk in a data file changed",
                   _corrupt_chunk_bytes),
        manifest_case("inline-chunk-bad-checksum", "corrupt", "one byte of an inline chunk changed",
                      lambda sp: _flip_inline(_inline(sp))),
        manifest_case("zstd-chunk-not-zstd", "corrupt", "codec ZSTD chunk whose bytes are not a zstd frame "
                      "(valid CRC)", lambda sp: _replace_text(sp, b"not a zstd frame at all, sorry", 1)),
        manifest_case("zstd-chunk-wrong-raw-length", "corrupt",
                      "zstd chunk that decompresses to fewer bytes than its raw length",
                      lambda sp: _grow_raw_length(_inline(sp, "text"))),
        manifest_case("zstd-chunk-truncated", "corrupt", "zstd frame cut short (valid CRC)",
                      lambda sp: _truncate_zstd(sp)),
        # Chunk payloads (§7.1, §7.2); CRCs valid.
        _payload_case("payload-row-count-mismatch", "payload header says 3 rows, the manifest 4",
                      lambda p, n: None, declared_rows=4),
        _payload_case("payload-column-count-wrong", "value state chunk with 3 columns",
                      lambda p, n: None, columns=3),
        _payload_case("payload-offsets-decrease", "a column's offsets decrease",
                      lambda p, n: struct.pack_into("<I", p, 8 + 4 * 2, 0)),
        _payload_case("payload-offset-past-end", "last offset of a column far beyond the payload",
                      lambda p, n: struct.pack_into("<I", p, 8 + 4 * n, 0x7FFFFFF0)),
        _payload_case("payload-first-offset-not-zero", "a column's first offset is 1",
                      lambda p, n: struct.pack_into("<I", p, 8, 1)),
        _payload_case("payload-header-truncated", "a 6-byte payload", lambda p, n: p.__delitem__(slice(6, None)),
                      rows=1),
        _payload_case("payload-trailing-bytes", "bytes after the last column",
                      lambda p, n: p.extend(b"\x00\x00")),
        # Values (spec/serializers.md §3); chunks valid.
        _value_case("value-string-invalid-utf8", "string value with bytes that are not UTF-8", string,
                    [b"ok", b"\xc3\x28"]),
        _value_case("value-boolean-invalid-byte", "boolean value 0x02", snapshot("boolean"), [b"\x01", b"\x02"]),
        _value_case("value-int64-wrong-width", "int64 value of 7 bytes", int64, [b"\x00" * 7]),
        _value_case("value-int32-trailing-byte", "int32 value of 5 bytes", snapshot("int32"), [b"\x00" * 5]),
        _value_case("value-float64-truncated", "float64 value of 4 bytes", snapshot("float64"), [b"\x00" * 4]),
        _value_case("value-nullable-invalid-flag", "nullable flag 0x02", snapshot("nullable", nested=[int64]),
                    [b"\x02" + b"\x00" * 8]),
        _value_case("value-nullable-null-with-payload", "null flag followed by bytes",
                    snapshot("nullable", nested=[int64]), [b"\x00\x00"]),
        _value_case("value-length-prefix-huge", "a list element's length prefix 0xFFFFFFFF",
                    snapshot("list", nested=[string]), [struct.pack("<II", 1, 0xFFFFFFFF) + b"abc"]),
        _value_case("value-list-count-huge", "list element count 0xFFFFFFFF in 8 bytes",
                    snapshot("list", nested=[int64]), [struct.pack("<I", 0xFFFFFFFF) + b"\x00" * 8]),
        _value_case("value-list-trailing-bytes", "bytes after the last list element",
                    snapshot("list", nested=[int64]), [struct.pack("<I", 1) + b"\x00" * 9]),
        _value_case("value-tuple-truncated", "tuple missing its second field",
                    snapshot("tuple", 2, [int64, int64], field_names=["a", "b"]), [b"\x00" * 8]),
        _value_case("value-map-duplicate-key", "map value with the same key twice",
                    snapshot("map", nested=[string, int64]),
                    [struct.pack("<I", 2) + (struct.pack("<I", 1) + b"k" + b"\x00" * 8) * 2]),
        _value_case("value-json-invalid", "json value that is not JSON", snapshot("json"), [b"{not json"]),
        _value_case("value-json-nan", "json value NaN (not JSON)", snapshot("json"), [b"NaN"]),
        _value_case("value-protobuf-invalid", "protobuf value that does not parse",
                    _cart_snapshot(), [b"\x0a\xff\xff\xff\xff\x0f"]),
        # Serializer snapshots (spec/serializers.md §2, §6, §7).
        manifest_case("unknown-builtin-serializer", "unsupported-feature", "value serializer 'int128' (a built-in "
                      "id this reader does not know)",
                      lambda sp: sp.keyed("count").value_serializer.CopyFrom(snapshot("int128"))),
        manifest_case("unregistered-user-serializer", "unsupported-feature",
                      "value serializer 'com.example.money' (user-defined, not registered)",
                      lambda sp: sp.keyed("count").value_serializer.CopyFrom(
                          snapshot("com.example.money", custom_configuration=b"EUR"))),
        manifest_case("serializer-snapshot-version-too-new", "unsupported-feature", "int64 snapshot version 99",
                      lambda sp: _set(sp.keyed("count").value_serializer, version=99)),
        manifest_case("key-serializer-snapshot-version-too-new", "unsupported-feature",
                      "key serializer snapshot version 99",
                      lambda sp: _set(sp.op("counter").key_serializer, version=99)),
        manifest_case("serializer-snapshot-version-zero", "corrupt", "snapshot version 0",
                      lambda sp: _set(sp.keyed("count").value_serializer, version=0)),
        manifest_case("serializer-snapshot-empty-id", "corrupt", "snapshot with an empty serializer_id",
                      lambda sp: _set(sp.keyed("count").value_serializer, serializer_id="")),
        manifest_case("serializer-nesting-too-deep", "corrupt", "33 nested serializers (limit 32)",
                      lambda sp: sp.keyed("count").value_serializer.CopyFrom(_nested(33))),
        manifest_case("serializer-tuple-field-names-mismatch", "corrupt", "tuple v2 with 2 fields and 1 name",
                      lambda sp: sp.keyed("count").value_serializer.CopyFrom(
                          snapshot("tuple", 2, [int64, int64], field_names=["a"]))),
        manifest_case("serializer-nullable-without-inner", "corrupt", "nullable snapshot without its inner",
                      lambda sp: sp.keyed("count").value_serializer.CopyFrom(snapshot("nullable"))),
        manifest_case("serializer-builtin-with-custom-configuration", "corrupt",
                      "built-in int64 snapshot with custom_configuration",
                      lambda sp: _set(sp.keyed("count").value_serializer, custom_configuration=b"\x01")),
        manifest_case("serializer-protobuf-message-missing", "corrupt",
                      "protobuf snapshot naming a message its descriptor set lacks",
                      lambda sp: sp.keyed("count").value_serializer.CopyFrom(_protobuf_missing_message())),
    ]
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    return cases


def _recrc(head_and_body: bytes) -> bytes:
    from pyref.checksum import crc32c

    return head_and_body + struct.pack("<I", crc32c(head_and_body))


def _move_list_state(sp: Savepoint) -> str:
    """Give counter a list state named "count" too; returns the keyed state's (unchanged) name."""
    ls = sp.op("counter").list_states.add()
    ls.CopyFrom(sp.list_state())
    ls.name = "count"
    return "count"


def _flip_inline(chunk) -> None:
    chunk.inline_data = _flip(chunk.inline_data, 3)


def _grow_raw_length(chunk) -> None:
    assert chunk.codec == 1, "the text chunk must be zstd-compressed"
    chunk.raw_length += 1


def _reverse_chunks(ks) -> None:
    chunks = list(ks.chunks)[::-1]
    del ks.chunks[:]
    ks.chunks.extend(chunks)


def _replace_text(sp: Savepoint, stored: bytes, codec: int, chunk=None) -> None:
    chunk = chunk if chunk is not None else _inline(sp, "text")
    raw_length = chunk.raw_length
    chunk.CopyFrom(inline_chunk(stored, chunk.row_count, chunk.key_group, codec, raw_length))


def _truncate_zstd(sp: Savepoint) -> None:
    chunk = _inline(sp, "text")
    assert chunk.codec == 1, "the text chunk must be zstd-compressed"
    _replace_text(sp, chunk.inline_data[:-6], 1, chunk)


def _cart_snapshot():
    from compat_tests.generate_goldens import cart_serializer

    return cart_serializer()[0].snapshot()


# --------------------------------------------------------------------------
# Forward compatibility
# --------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def unknown_fields(seed: int) -> bytes:
    """Fields numbered 1000+ of every wire type, as a future writer might add them."""
    base = 1000 + 10 * seed
    nested = _varint((1 << 3) | 0) + _varint(7) + _varint((2 << 3) | 2) + _varint(4) + b"deep"
    return b"".join([
        _varint((base << 3) | 0) + _varint(2**63 + seed),  # varint
        _varint(((base + 1) << 3) | 1) + struct.pack("<d", 1.5),  # fixed64
        _varint(((base + 2) << 3) | 2) + _varint(len(nested)) + nested,  # length-delimited: a message
        _varint(((base + 3) << 3) | 5) + struct.pack("<I", 0xDEADBEEF),  # fixed32
        _varint((536870911 << 3) | 0) + _varint(1),  # the largest field number
    ])


def add_unknown_fields(manifest) -> None:
    """Unknown fields in every message of the manifest, serializer snapshots included."""
    seed = iter(range(10**6))

    def visit(msg) -> None:
        for fd, value in msg.ListFields():
            if fd.type != fd.TYPE_MESSAGE:
                continue
            if fd.name in ("file_descriptor_set",):  # descriptor protos are not ours
                continue
            for child in (value if _is_repeated(fd) else [value]):
                visit(child)
        msg.MergeFromString(unknown_fields(next(seed) % 50))

    visit(manifest)


def _is_repeated(fd) -> bool:
    flag = getattr(fd, "is_repeated", None)
    if flag is not None:
        return bool(flag() if callable(flag) else flag)
    return fd.label == fd.LABEL_REPEATED


@dataclass
class ForwardCase:
    name: str
    exercises: str
    change: Callable[[Savepoint], int | None]  # returns the minor version to label, or None
    derived: bool = False


def forward_cases() -> list[ForwardCase]:
    def optional(sp: Savepoint):
        sp.manifest.optional_features.extend(["x-future-bloom-filters", "x-another-optional-feature"])

    def fields(sp: Savepoint):
        add_unknown_fields(sp.manifest)

    def minor(sp: Savepoint):
        return 9

    def everything(sp: Savepoint):
        optional(sp)
        fields(sp)
        return 9

    return [
        ForwardCase("unknown-optional-feature", "two unknown optional features: readers ignore them", optional),
        ForwardCase("unknown-fields", "unknown fields (numbers 1000+ and 2^29-1, every wire type) in every manifest "
                    "message and serializer snapshot: readers ignore them", fields),
        ForwardCase("newer-minor-version", "format version 1.9: a 1.x reader reads every 1.y", minor),
        ForwardCase("all-future-additions", "version 1.9, unknown optional features and unknown fields together",
                    everything),
        ForwardCase("unknown-fields-in-shallow-savepoint", "unknown fields and an unknown optional feature in a "
                    "shallow savepoint and in its base", everything, derived=True),
    ]


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def _write_json(path: pathlib.Path, document) -> None:
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def _write_source(case_dir: pathlib.Path, derived: bool) -> list[OperatorModel]:
    """The valid savepoint a case starts from: ``savepoint/`` (shallow over ``base/`` when derived)."""
    model = base_model()
    if not derived:
        write_base(case_dir / "savepoint")
        return model
    from pyref import rescale

    write_base(case_dir / "base")
    rescale(str(case_dir / "base"), str(case_dir / "savepoint"), 3)
    remove_lock(case_dir / "savepoint")
    return rescale_model(model, 3)


def generate_reject(case: RejectCase, target: pathlib.Path, command: str) -> None:
    from pyref.errors import SavepointError

    tmp = fresh_dir(target)
    try:
        _write_source(tmp, case.derived)
        case.mutate(tmp)
        try:
            dump_savepoint(tmp / "savepoint", REJECT_PARALLELISMS)
        except SavepointError as exc:
            got = error_category(exc, tmp / "savepoint")
            if got != case.category:
                raise SystemExit(f"reject/{case.name}: pyref refuses it as {got!r}, expected {case.category!r}: {exc}")
        else:
            raise SystemExit(f"reject/{case.name}: pyref reads it; every reader must refuse it ({case.breaks})")
        _write_json(tmp / "expected_error.json", {"category": case.category, "breaks": case.breaks,
                                                  "parallelisms": list(REJECT_PARALLELISMS)})
        _write_json(tmp / "generated.json", {"case": case.name, **provenance(command)})
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def generate_forward(case: ForwardCase, target: pathlib.Path, command: str) -> None:
    tmp = fresh_dir(target)
    try:
        model = _write_source(tmp, case.derived)
        dirs = [tmp / "savepoint"] + ([tmp / "base"] if case.derived else [])
        minor = None
        for d in dirs:
            sp = Savepoint(d)
            minor = case.change(sp)
            sp.save(minor)
        version = f"1.{minor}" if minor is not None else _label(tmp / "savepoint")
        expected = expected_from_model(model, FORWARD_PARALLELISMS, version)
        actual = dump_savepoint(tmp / "savepoint", FORWARD_PARALLELISMS)
        if canonical_text(actual) != canonical_text(expected):
            raise SystemExit(f"forward/{case.name}: pyref does not restore it as expected: "
                             f"{first_difference(expected, actual)}")
        _write_json(tmp / "expected.json", expected)
        _write_json(tmp / "generated.json", {"case": case.name, "exercises": case.exercises, **provenance(command)})
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _label(path: pathlib.Path) -> str:
    data = (path / "_manifest").read_bytes()
    return "{}.{}".format(*struct.unpack_from("<HH", data, 8))


def write_readme(root: pathlib.Path, title: str, intro: str, rows: list[tuple[str, str, str]]) -> None:
    lines = [f"# {title}", "", intro, "", "| case | expected | what it breaks / exercises |", "|---|---|---|"]
    lines += [f"| `{name}` | {expected} | {text} |" for name, expected, text in rows]
    info = None
    for case_dir in sorted(root.iterdir()):
        if (case_dir / "generated.json").exists():
            info = json.loads((case_dir / "generated.json").read_text(encoding="utf-8"))
    if info:
        deps = ", ".join(f"{k}=={v}" for k, v in info["dependencies"].items())
        lines += ["", f"Generated by `{info['command']}` (pyref {info['pyref_version']}, {info['python']}, {deps}); "
                      "each case's `generated.json` records its own run."]
    (root / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def generate(reject_root: pathlib.Path, forward_root: pathlib.Path, only: list[str] | None = None) -> list[str]:
    command = command_line()
    made: list[str] = []
    for root, items, make in ((reject_root, reject_cases(), generate_reject),
                              (forward_root, forward_cases(), generate_forward)):
        root.mkdir(parents=True, exist_ok=True)
        new_files = []
        for case in items:
            if only and case.name not in only:
                continue
            target = root / case.name
            if target.exists():
                print(f"exists, kept: {target}")
                continue
            make(case, target, command)
            made.append(case.name)
            new_files += [f"{case.name}/{rel}" for rel in corpus_files(target)]
            print(f"wrote {target}")
        add_to_sums(root, new_files)
    write_readme(reject_root, "Reject corpus",
                 "Savepoints every reader must refuse, with the error category of `expected_error.json` "
                 "(protocol: `compat_tests/README.md`). Made by `compat_tests/generate_rejects.py` from valid "
                 "savepoints; written once, hashed in `SHA256SUMS`.",
                 [(c.name, f"`{c.category}`", c.breaks) for c in reject_cases() if (reject_root / c.name).exists()])
    write_readme(forward_root, "Forward-compatibility corpus",
                 "Savepoints from a future writer of the same major version that every reader must restore "
                 "exactly as `expected.json` says. Made by `compat_tests/generate_rejects.py`; written once, hashed "
                 "in `SHA256SUMS`.",
                 [(c.name, "restores", c.exercises) for c in forward_cases() if (forward_root / c.name).exists()])
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reject-out", type=pathlib.Path, default=REJECT_DIR)
    parser.add_argument("--forward-out", type=pathlib.Path, default=FORWARD_DIR)
    parser.add_argument("--case", action="append", help="generate only this case (repeatable)")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        for c in reject_cases():
            print(f"reject/{c.name} [{c.category}]: {c.breaks}")
        for f in forward_cases():
            print(f"forward/{f.name}: {f.exercises}")
        return 0
    made = generate(args.reject_out, args.forward_out, args.case)
    print(f"{len(made)} cases written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
