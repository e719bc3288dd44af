"""Golden and reject cases of the reader rules issue 13 made exact, where the bytes of a
chunk, a value or a descriptor set decide the outcome: zstd frames (spec/format.md §7.3,
rule Z2), the key-group, key-bound and data-file-magic checks (§7.1, §7.6, §6.3), JSON
nesting and byte order marks (spec/serializers.md §3.5, §3.12), protobuf descriptor sets
and wire forms (§3.11), map keys, tuple field names and the nesting of LIST state
(§2.3, §3.10, §7).

    python -m compat_tests.generate_reader_rules          # the missing cases
    python -m compat_tests.generate_reader_rules --list

Goldens go to ``golden/1.0/`` (every case here uses only format 1.0 constructs, so it is
labelled 1.0 and filed there, spec/format.md §9.4), made and checked as
``generate_goldens_1_2`` makes its cases (dump schema 2); rejects to ``reject/reader-rules/``, made from the
valid savepoint of ``generate_rejects`` and checked as it checks them. Cases are written
once, their files added to the corpora's ``SHA256SUMS``.
"""

from __future__ import annotations

import pathlib
import struct
import sys
from collections.abc import Callable

from compat_tests import GOLDEN_DIR, REJECT_DIR
from compat_tests._build import generator_main, rewrite_manifest, write_model
from compat_tests.canonical import KeyedModel, ListModel, OperatorModel
from compat_tests.generate_goldens import Case
from compat_tests.generate_goldens_1_2 import generate as generate_goldens
from compat_tests.generate_rejects import (
    RejectCase,
    Savepoint,
    generate_reject,
    inline_chunk,
    key_group_of,
    manifest_case,
    payload_of,
    replace_values,
    snapshot,
    write_readme,
)
from compat_tests.generate_rejects_bounded_work import write_cases

REJECT_SUBDIRECTORY = "reader-rules"
PARALLELISMS = (1, 2, 3)
ZSTD_MAGIC = struct.pack("<I", 0xFD2FB528)
#: A skippable frame (RFC 8878 §3.1.2): magic, length, then that many bytes nobody reads.
SKIPPABLE_FRAME = struct.pack("<II", 0x184D2A50, 4) + b"skip"
#: Window descriptors (RFC 8878 §3.1.1.1.2): 2^27 bytes, the largest the format allows
#: (rule Z2), and the next larger window a header can state, 2^27 + 2^24.
WINDOW_2_27, WINDOW_OVER_2_27 = 17 << 3, (17 << 3) | 1


def _s():
    from pyref import serializers

    return serializers


# --------------------------------------------------------------------------
# zstd frames (spec/format.md §7.3)
# --------------------------------------------------------------------------


def zstd_frame(payload: bytes, *, checksum: bool = False, content_size: bool = True,
               window_descriptor: int | None = None) -> bytes:
    """One zstd frame of ``payload`` by the zstandard library (level 3). Without the content
    size in the header, the frame is not single-segment and has a window descriptor, which
    ``window_descriptor`` replaces: a larger window than the content needs decodes alike."""
    import zstandard

    frame = zstandard.ZstdCompressor(level=3, write_checksum=checksum,
                                     write_content_size=content_size).compress(payload)
    if window_descriptor is not None:
        assert not content_size and frame[4] & 0x20 == 0, "only a frame with a window descriptor"
        frame = frame[:5] + bytes([window_descriptor]) + frame[6:]
    return frame


def block_frame(payload: bytes) -> bytes:
    """One zstd frame of ``payload`` in raw and RLE blocks only (RFC 8878 §3.1.1.2), built by
    hand: every run of 8 or more equal bytes is an RLE block, the bytes between are raw blocks.
    No content size, no checksum, a window of 2^17 bytes (the largest block is smaller)."""
    import re

    blocks = []
    pos = 0
    for run in re.finditer(rb"(.)\1{7,}", payload, re.DOTALL):
        if run.start() > pos:
            blocks.append((0, payload[pos:run.start()], run.start() - pos))
        blocks.append((1, payload[run.start():run.start() + 1], run.end() - run.start()))
        pos = run.end()
    if pos < len(payload):
        blocks.append((0, payload[pos:], len(payload) - pos))
    out = bytearray(ZSTD_MAGIC + bytes([0x00, 7 << 3]))
    for i, (block_type, body, size) in enumerate(blocks):
        assert size <= 1 << 17
        header = (i == len(blocks) - 1) | block_type << 1 | size << 3
        out += struct.pack("<I", header)[:3] + body
    return bytes(out)


def _recompress(chunk, stored_of: Callable[[bytes], bytes], payload: bytes) -> None:
    """Store ``chunk``'s payload as ``stored_of(payload)``, inline, CRC32C recomputed."""
    chunk.CopyFrom(inline_chunk(stored_of(payload), chunk.row_count, chunk.key_group, codec=1,
                                raw_length=len(payload)))


def _payload(sp: Savepoint, chunk) -> bytes:
    from pyref.codecs import decompress

    stored = chunk.inline_data if chunk.WhichOneof("location") == "inline_data" else \
        sp.file_of(chunk).read_bytes()[chunk.range.offset:chunk.range.offset + chunk.range.length]
    return decompress(chunk.codec, stored, chunk.raw_length)


def zstd_case(name: str, breaks: str, stored_of: Callable[[bytes], bytes]) -> RejectCase:
    """counter/text's chunk (a zstd chunk) re-stored as ``stored_of(payload)``."""

    def change(sp: Savepoint) -> None:
        chunk = sp.keyed("text").chunks[0]
        _recompress(chunk, stored_of, _payload(sp, chunk))

    return manifest_case(name, "corrupt", breaks, change)


def _bad_checksum(payload: bytes) -> bytes:
    frame = zstd_frame(payload, checksum=True)
    return frame[:-4] + bytes(b ^ 0xFF for b in frame[-4:])


def _two_frames(payload: bytes) -> bytes:
    half = len(payload) // 2
    return zstd_frame(payload[:half]) + zstd_frame(payload[half:])


# --------------------------------------------------------------------------
# Key groups, key bounds, data-file magic (spec/format.md §6.3, §7.1, §7.6)
# --------------------------------------------------------------------------


def _key_in_wrong_key_group(sp: Savepoint) -> None:
    """counter/count holds key "doc" in the chunk of the next key group."""
    ks = sp.keyed("count")
    del ks.chunks[:]
    key, value = _s().String().encode("doc"), _s().Int64().encode(7)
    ks.chunks.append(inline_chunk(payload_of([[key], [value]]), 1, (key_group_of("doc") + 1) % 128))


def _key_outside_bounds(sp: Savepoint) -> None:
    """A 1.1 savepoint whose chunk's key bounds leave out one of its keys."""
    ks = sp.keyed("count")
    del ks.chunks[:]
    keys = [k for k in (f"key-{i}" for i in range(2000)) if key_group_of(k) == key_group_of("key-0")][:3]
    encoded = sorted(_s().String().encode(k) for k in keys)
    ks.chunks.append(inline_chunk(payload_of([encoded, [_s().Int64().encode(1)] * 3]), 3, key_group_of("key-0")))
    ks.chunks[0].key_bounds.min, ks.chunks[0].key_bounds.max = encoded[0], encoded[1]  # encoded[2] is outside
    sp.manifest.optional_features.append("chunk-key-bounds")


def _damage_magic(case_dir: pathlib.Path) -> None:
    sp = Savepoint(case_dir / "savepoint")
    f = sp.path / sp.manifest.data_files[0].path
    data = bytearray(f.read_bytes())
    data[3] ^= 0x01  # "SVD" -> "SVE": every chunk and length still checks out
    f.write_bytes(bytes(data))


# --------------------------------------------------------------------------
# Values and snapshots (spec/serializers.md)
# --------------------------------------------------------------------------


def nested_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _deep_list(depth: int):
    """list(...list(int64)...) of ``depth`` levels in all."""
    snap = snapshot("int64")
    for _ in range(depth - 1):
        snap = snapshot("list", nested=[snap])
    return snap


def _map_of(key) -> object:
    return snapshot("map", nested=[key, snapshot("int64")])


def _values_case(name: str, category: str, breaks: str, snap, values: list[bytes]) -> RejectCase:
    return manifest_case(name, category, breaks, lambda sp: replace_values(sp, snap, values))


def _list_state_too_deep(sp: Savepoint) -> None:
    """A LIST state whose element serializer is 33 levels deep (the implied list wrapper aside)."""
    ks = sp.keyed("count")
    ks.kind = 2  # LIST
    ks.value_serializer.CopyFrom(_deep_list(33))
    del ks.chunks[:]
    key = _s().String().encode("doc")
    ks.chunks.append(inline_chunk(payload_of([[key], [b"\x00\x00\x00\x00"]]), 1, key_group_of("doc")))


# --------------------------------------------------------------------------
# Protobuf (spec/serializers.md §3.11)
# --------------------------------------------------------------------------


def _pb_descriptor():
    from google.protobuf import descriptor_pb2

    return descriptor_pb2


def _fdp():
    return _pb_descriptor().FieldDescriptorProto


def point_file(syntax: str = "proto3", package: str = "x"):
    """``x.proto``: message ``M { int32 a = 1; }`` in ``syntax``."""
    d, F = _pb_descriptor(), _fdp()
    f = d.FileDescriptorProto(name=f"{package}.proto", package=package, syntax=syntax)
    f.message_type.add(name="M").field.add(name="a", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    return f


def protobuf_snapshot(files, message_name: str = "x.M"):
    from pyref._proto.savepoint.v1 import serializer_pb2

    fds = _pb_descriptor().FileDescriptorSet(file=list(files))
    return snapshot("protobuf", protobuf=serializer_pb2.ProtobufMessageConfig(file_descriptor_set=fds,
                                                                              message_name=message_name))


def _message(f):
    return f.message_type[0]


def _add_field(f, name: str, number: int, ftype: int, label: int = 1, **extra) -> None:
    _message(f).field.add(name=name, number=number, type=ftype, label=label, **extra)


def _map_entry(f, *, key_type: int = 5, label: int = 3, entry: str = "BEntry") -> None:
    F = _fdp()
    e = _message(f).nested_type.add(name=entry)
    e.options.map_entry = True
    e.field.extend([F(name="key", number=1, type=key_type, label=1), F(name="value", number=2, type=5, label=1)])
    _add_field(f, "b", 2, F.TYPE_MESSAGE, label, type_name=f".x.M.{entry}")


def _enum(f, *numbers: int, alias: bool = False):
    e = f.enum_type.add(name="E")
    e.options.allow_alias = alias
    for i, n in enumerate(numbers):
        e.value.add(name=f"V{i}", number=n)
    return e


def _two_files(change: Callable) -> list:
    """``y.proto`` and ``x.proto`` importing it, after ``change(x, y)``."""
    x, y = point_file(), point_file(package="y")
    x.dependency.append("y.proto")
    change(x, y)
    return [y, x]


def _non_utf8_name(f) -> None:
    # descriptor.proto is proto2: its strings are bytes on the wire; serialize, then patch the name.
    _message(f).name = "M\u00e9"


#: One descriptor set per rule of spec/serializers.md §3.11.1 it breaks: (case name, what it
#: breaks, the files of the set). Each set is otherwise the valid ``x.M { int32 a = 1; }``.
def descriptor_set_breaks() -> list[tuple[str, str, Callable[[], list]]]:
    F, d = _fdp(), _pb_descriptor()

    def one(change: Callable, syntax: str = "proto3") -> Callable[[], list]:
        def files() -> list:
            f = point_file(syntax)
            change(f)
            return [f]
        return files

    def setattr_(obj_of, **values) -> Callable:
        return lambda f: [setattr(obj_of(f), k, v) for k, v in values.items()]

    return [
        ("file-listed-twice", "a file listed twice", lambda: [point_file(), point_file()]),
        ("file-name-empty", "a file with an empty name", one(setattr_(lambda f: f, name=""))),
        ("import-missing", "an import the set does not hold",
         one(lambda f: f.dependency.append("absent.proto"))),
        ("import-cycle", "two files importing each other",
         lambda: _two_files(lambda x, y: y.dependency.append("x.proto"))),
        ("syntax-unknown", "syntax 'proto4'", one(setattr_(lambda f: f, syntax="proto4"))),
        ("name-not-identifier", "a field named 'a-b'", one(setattr_(lambda f: _message(f).field[0], name="a-b"))),
        ("name-duplicate-symbol", "a message and an enum of one full name",
         one(lambda f: f.enum_type.add(name="M").value.add(name="Z", number=0))),
        ("name-duplicate-in-message-scope", "a field and a nested message of one name",
         one(lambda f: _message(f).nested_type.add(name="a"))),
        ("type-unresolved", "a field type that names no type",
         one(lambda f: _add_field(f, "b", 2, F.TYPE_MESSAGE, type_name=".x.Absent"))),
        ("type-kind-mismatch", "a message-typed field whose type is an enum",
         one(lambda f: (_enum(f, 0), _add_field(f, "b", 2, F.TYPE_MESSAGE, type_name=".x.E")))),
        ("field-number-zero", "field number 0", one(setattr_(lambda f: _message(f).field[0], number=0))),
        ("field-number-too-large", "field number 2^29", one(setattr_(lambda f: _message(f).field[0], number=2**29))),
        ("field-number-implementation-range", "field number 19000 (19000-19999 are protobuf's own)",
         one(setattr_(lambda f: _message(f).field[0], number=19000))),
        ("field-number-duplicate", "two fields numbered 1", one(lambda f: _add_field(f, "b", 1, F.TYPE_INT32))),
        ("field-number-reserved", "a field whose number is reserved",
         one(lambda f: _message(f).reserved_range.add(start=1, end=2))),
        ("field-name-reserved", "a field whose name is reserved", one(lambda f: _message(f).reserved_name.append("a"))),
        ("field-number-in-extension-range", "a field inside an extension range",
         one(lambda f: _message(f).extension_range.add(start=1, end=10), "proto2")),
        ("oneof-index-out-of-range", "oneof_index 3 of no oneof",
         one(setattr_(lambda f: _message(f).field[0], oneof_index=3))),
        ("oneof-not-consecutive", "the fields of a oneof apart",
         one(lambda f: (_message(f).oneof_decl.add(name="o"), setattr(_message(f).field[0], "oneof_index", 0),
                        _add_field(f, "b", 2, F.TYPE_INT32), _add_field(f, "c", 3, F.TYPE_INT32, oneof_index=0)))),
        ("json-name-clash", "fields 'a_b' and 'aB' of one JSON name",
         one(lambda f: (_add_field(f, "a_b", 2, F.TYPE_INT32), _add_field(f, "aB", 3, F.TYPE_INT32)))),
        ("proto3-required", "a required field in proto3", one(setattr_(lambda f: _message(f).field[0], label=2))),
        ("proto3-default-value", "a default value in proto3",
         one(setattr_(lambda f: _message(f).field[0], default_value="5"))),
        ("proto3-enum-first-not-zero", "a proto3 enum whose first value is 1", one(lambda f: _enum(f, 1))),
        ("proto3-group", "a group field in proto3",
         one(lambda f: (_message(f).nested_type.add(name="G"),
                        _add_field(f, "g", 2, F.TYPE_GROUP, type_name=".x.M.G")))),
        ("proto3-closed-enum", "a proto3 field of a proto2 enum",
         lambda: _two_files(lambda x, y: (setattr(y, "syntax", "proto2"), _enum(y, 1),
                                          _add_field(x, "e", 2, F.TYPE_ENUM, type_name=".y.E")))),
        ("default-value-invalid", "proto2 default 'abc' of an int32 field",
         one(setattr_(lambda f: _message(f).field[0], default_value="abc"), "proto2")),
        ("enum-without-values", "an enum without values", one(lambda f: f.enum_type.add(name="E"))),
        ("enum-alias-not-allowed", "two enum values of one number without allow_alias", one(lambda f: _enum(f, 0, 0))),
        ("map-entry-field-not-repeated", "a map entry used by a singular field", one(lambda f: _map_entry(f, label=1))),
        ("map-entry-key-bytes", "a map entry keyed by bytes", one(lambda f: _map_entry(f, key_type=F.TYPE_BYTES))),
        ("map-entry-misnamed", "a map entry not named after its field", one(lambda f: _map_entry(f, entry="XEntry"))),
        ("packed-string", "[packed = true] on a repeated string",
         one(lambda f: _add_field(f, "b", 2, F.TYPE_STRING, 3, options=d.FieldOptions(packed=True)))),
        ("extension-outside-range", "an extension numbered outside the extendee's extension ranges",
         one(lambda f: f.extension.add(name="e", number=100, type=F.TYPE_INT32, label=1, extendee=".x.M"), "proto2")),
        ("name-not-utf8", "a message name that is not UTF-8 (descriptor.proto is proto2: its strings are bytes)",
         one(_non_utf8_name)),
        ("package-clashes-with-type", "a package named like a message of another file",
         lambda: _two_files(lambda x, y: setattr(y, "package", "x.M"))),
        ("proto3-extension-of-a-message", "a proto3 extension of a proto2 message (proto3 extends only options)",
         lambda: _two_files(lambda x, y: (setattr(y, "syntax", "proto2"),
                                          _message(y).extension_range.add(start=100, end=200),
                                          x.extension.add(name="e", number=100, type=F.TYPE_INT32, label=1,
                                                          extendee=".y.M")))),
    ]


def _descriptor_set_case(name: str, breaks: str, files_of: Callable[[], list]) -> RejectCase:
    def change(sp: Savepoint) -> None:
        replace_values(sp, protobuf_snapshot(files_of()), [b"\x08\x01"])
        if name == "name-not-utf8":
            _patch_non_utf8(sp)

    return manifest_case(f"protobuf-descriptors-{name}", "corrupt", f"protobuf descriptor set: {breaks}", change)


def _patch_non_utf8(sp: Savepoint) -> None:
    """Turn the UTF-8 "Mé" (4d c3 a9) of the set into "M\\xe9" plus a byte, keeping every length."""
    snap = sp.keyed("count").value_serializer
    data = snap.SerializeToString().replace(b"M\xc3\xa9", b"M\xe9\xe9")
    snap.Clear()
    snap.MergeFromString(data)


def _varint(n: int) -> bytes:
    from pyref.testing import varint

    return varint(n)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _len(number: int, body: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(body)) + body


def wire_files():
    """``w.proto`` (proto3): ``message M { string s = 1; repeated int32 r = 2; E e = 3; M m = 4;
    int32 i = 5; repeated fixed32 f = 6; }`` with ``enum E { Z = 0; O = 1; }``; and ``v.proto``
    (proto2) with the same fields, a group ``g = 7`` and ``required int32 req = 8``."""
    d, F = _pb_descriptor(), _fdp()
    out = []
    for package, syntax in (("w", "proto3"), ("v", "proto2")):
        f = d.FileDescriptorProto(name=f"{package}.proto", package=package, syntax=syntax)
        e = f.enum_type.add(name="E")
        e.value.add(name="Z", number=0)
        e.value.add(name="O", number=1)
        m = f.message_type.add(name="M")
        m.field.extend([F(name="s", number=1, type=F.TYPE_STRING, label=1),
                        F(name="r", number=2, type=F.TYPE_INT32, label=3),
                        F(name="e", number=3, type=F.TYPE_ENUM, type_name=f".{package}.E", label=1),
                        F(name="m", number=4, type=F.TYPE_MESSAGE, type_name=f".{package}.M", label=1),
                        F(name="i", number=5, type=F.TYPE_INT32, label=1),
                        F(name="f", number=6, type=F.TYPE_FIXED32, label=3)])
        if syntax == "proto2":
            m.nested_type.add(name="G").field.add(name="x", number=1, type=F.TYPE_INT32, label=1)
            m.field.add(name="g", number=7, type=F.TYPE_GROUP, type_name=".v.M.G", label=1)
            m.field.add(name="req", number=8, type=F.TYPE_INT32, label=2)
        out.append(f)
    return out


def nested_messages(depth: int) -> bytes:
    """Field ``m`` nested ``depth`` messages deep below the top-level message."""
    body = b""
    for _ in range(depth):
        body = _len(4, body)
    return body


def _group(number: int, body: bytes = b"") -> bytes:
    return _tag(number, 3) + body + _tag(number, 4)


#: Wire forms every reader accepts (§3.11.2), in proto2 and proto3 alike: (what, value).
def accepted_wire_forms() -> list[tuple[str, bytes]]:
    return [
        ("wrong wire type: string field 1 as a varint (kept as an unknown field)", _tag(1, 0) + _varint(5)),
        ("packed repeated int32", _len(2, _varint(1) + _varint(2) + _varint(300))),
        ("unpacked repeated int32", _tag(2, 0) + _varint(1) + _tag(2, 0) + _varint(2)),
        ("unknown enum value 7", _tag(3, 0) + _varint(7)),
        ("a singular field twice", _tag(5, 0) + _varint(1) + _tag(5, 0) + _varint(2)),
        ("int32 field holding 2^40", _tag(5, 0) + _varint(2**40)),
        ("10-byte varint with bits beyond 64", _tag(5, 0) + b"\xff" * 9 + b"\x7f"),
        ("unknown group", _group(20, _tag(1, 0) + _varint(1))),
        ("unknown length-delimited field that does not parse as a message", _len(30, b"\xff\xff")),
        ("field number 2^29 - 1", _tag(2**29 - 1, 0) + _varint(1)),
        ("messages nested 100 deep below the top-level message", nested_messages(100)),
        ("empty message", b""),
    ]


def accepted_proto2_forms() -> list[tuple[str, bytes]]:
    return [
        ("proto2 string field that is not UTF-8", _len(1, b"\xc3\x28")),
        ("proto2 group field", _group(7, _tag(1, 0) + _varint(3))),
        ("proto2 required field missing", _tag(5, 0) + _varint(1)),
    ]


def refused_wire_forms() -> list[tuple[str, str, bytes]]:
    """(case name, what it breaks, proto3 value)."""
    return [
        ("string-not-utf8", "a proto3 string field that is not UTF-8", _len(1, b"\xc3\x28")),
        ("nested-101-deep", "messages nested 101 deep below the top-level message", nested_messages(101)),
        ("groups-101-deep", "unknown groups nested 101 deep", _nested_groups(101)),
        ("wire-type-7", "wire type 7", _tag(9, 7)),
        ("field-number-zero", "field number 0", _tag(0, 0) + _varint(1)),
        ("field-number-2-29", "field number 2^29", _tag(2**29, 0) + _varint(1)),
        ("group-end-mismatched", "an unknown group closed by another field number's end tag",
         _tag(20, 3) + _tag(21, 4)),
        ("group-unterminated", "an unknown group without its end tag", _tag(20, 3) + _tag(1, 0) + _varint(1)),
        ("packed-fixed32-partial", "a packed fixed32 field of 3 bytes", _len(6, b"abc")),
        ("varint-11-bytes", "a varint of 11 bytes", _tag(5, 0) + b"\xff" * 10 + b"\x01"),
        ("length-past-end", "a length-delimited field longer than the value", _tag(1, 2) + _varint(5) + b"ab"),
        ("nested-message-invalid", "a known message field whose bytes do not parse", _len(4, b"\xff\xff")),
    ]


def _nested_groups(depth: int) -> bytes:
    body = b""
    for _ in range(depth):
        body = _group(20, body)
    return body


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


def reject_cases() -> list[RejectCase]:
    string, int64 = snapshot("string"), snapshot("int64")
    cases = [
        # zstd frames (format.md §7.3)
        zstd_case("zstd-content-checksum-mismatch", "a zstd frame whose content checksum is wrong (CRC32C of the "
                  "stored bytes valid): readers check it", _bad_checksum),
        zstd_case("zstd-two-frames", "the payload as two concatenated zstd frames (rule Z2: exactly one)", _two_frames),
        zstd_case("zstd-skippable-frame-after", "a skippable frame after the zstd frame (rule Z2)",
                  lambda p: zstd_frame(p) + SKIPPABLE_FRAME),
        zstd_case("zstd-skippable-frame-before", "a skippable frame before the zstd frame (rule Z2)",
                  lambda p: SKIPPABLE_FRAME + zstd_frame(p)),
        zstd_case("zstd-window-over-limit", "a zstd frame whose header asks for a window of 2^27 + 2^24 bytes "
                  "(rule Z2: at most 2^27)",
                  lambda p: zstd_frame(p, content_size=False, window_descriptor=WINDOW_OVER_2_27)),
        # Key groups, key bounds, data-file magic (format.md §7.1, §7.6, §6.3)
        manifest_case("key-in-wrong-key-group", "corrupt", "a key stored in the chunk of another key group (§7.1: "
                      "readers check every row)", _key_in_wrong_key_group),
        manifest_case("key-outside-key-bounds", "corrupt", "format 1.1: a chunk holding a key greater than its "
                      "key_bounds.max (§7.6: readers check every key)", _key_outside_bounds, minor=1),
        RejectCase("data-file-magic-damaged", "corrupt", "a data file whose magic is \\x89SVE (§6.3: readers check "
                   "it before using the file)", _damage_magic),
        # JSON and strings (serializers.md §3.5, §3.12)
        _values_case("value-json-nested-65", "corrupt", "a json value nested 65 arrays deep (limit 64)",
                     snapshot("json"), [nested_json(65)]),
        _values_case("value-json-nested-5000", "corrupt", "a json value nested 5000 arrays deep (limit 64)",
                     snapshot("json"), [nested_json(5000)]),
        _values_case("value-json-leading-byte-order-mark", "corrupt", "a json value starting with the bytes "
                     "ef bb bf (U+FEFF is not JSON; readers must not strip it)", snapshot("json"),
                     ["\ufeff[1]".encode()]),
        # Snapshots (serializers.md §2.3, §3.8, §3.10, §7)
        _values_case("map-key-unknown-builtin", "unsupported-feature", "a map keyed by 'int128', a built-in this "
                     "reader does not know: unsupported before the key rule", _map_of(snapshot("int128")),
                     [b"\x00\x00\x00\x00"]),
        _values_case("map-key-list-of-unknown-builtin", "unsupported-feature", "a map keyed by list('int128'): "
                     "children are restored before the key rule is checked", _map_of(
                         snapshot("list", nested=[snapshot("int128")])), [b"\x00\x00\x00\x00"]),
        _values_case("map-key-nullable-user-defined", "unsupported-feature", "a map keyed by nullable of an "
                     "unregistered user-defined serializer (an allowed key serializer)", _map_of(
                         snapshot("nullable", nested=[snapshot("com.example.key")])), [b"\x00\x00\x00\x00"]),
        _values_case("map-key-tuple-user-defined", "unsupported-feature", "a map keyed by a tuple of an "
                     "unregistered user-defined serializer and string (an allowed key serializer)", _map_of(
                         snapshot("tuple", 2, [snapshot("com.example.key"), string], field_names=["a", "b"])),
                     [b"\x00\x00\x00\x00"]),
        _values_case("serializer-tuple-field-name-empty", "corrupt", "a tuple field named ''",
                     snapshot("tuple", 2, [int64, int64], field_names=["a", ""]), [b"\x00" * 16]),
        _values_case("serializer-tuple-field-names-duplicate", "corrupt", "two tuple fields named 'a'",
                     snapshot("tuple", 2, [int64, int64], field_names=["a", "a"]), [b"\x00" * 16]),
        manifest_case("list-state-value-serializer-33-deep", "corrupt", "a LIST state whose value (element) "
                      "serializer is 33 levels deep; the implied list wrapper does not count, this does",
                      _list_state_too_deep),
        # Protobuf (serializers.md §3.11)
        *(_descriptor_set_case(name, breaks, files) for name, breaks, files in descriptor_set_breaks()),
        *(_values_case(f"value-protobuf-{name}", "corrupt", f"a protobuf value: {breaks}",
                       protobuf_snapshot(wire_files()[:1], "w.M"), [value])
          for name, breaks, value in refused_wire_forms()),
    ]
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    return cases


def _single_state(name: str, exercises: str, keyed: Callable[[], list[KeyedModel]],
                  lists: Callable[[], list[ListModel]] = list, operator_id: str = "job",
                  after: Callable[[pathlib.Path, list[OperatorModel]], None] | None = None,
                  **writer_options) -> Case:
    def build(case_dir: pathlib.Path) -> list[OperatorModel]:
        model = [OperatorModel(operator_id, 2, 128, _s().String(), lists(), keyed())]
        write_model(case_dir / "savepoint", model, **writer_options)
        if after is not None:
            after(case_dir / "savepoint", model)
        return model

    return Case(name, exercises, build, PARALLELISMS, writer_options, "1.0")


def _json_rows() -> list[tuple]:
    deepest = b'{"a":' * 32 + b"[" * 32 + b'"[[[{{{\\"["' + b"]" * 32 + b"}" * 32
    return [("arrays", nested_json(64)), ("objects-and-arrays", deepest), ("scalar", b"1"),
            ("brackets-in-text", b'"' + b"[" * 100 + b'"')]


def _json_keyed() -> list[KeyedModel]:
    import json

    return [KeyedModel("documents", "value", _s().Json(), [(k, json.loads(v)) for k, v in _json_rows()])]


def _bom_keyed() -> list[KeyedModel]:
    s = _s()
    return [KeyedModel("\ufeffnames", "value", s.String(), [("\ufeff", "\ufeff"), ("\ufeffkey", "\ufeffvalue"),
                                                          ("key", "value\ufeff")]),
            KeyedModel("documents", "value", s.Json(), [("text", "\ufeffx"), ("list", ["\ufeff", {"\ufeff": 1}])])]


def _bom_lists() -> list[ListModel]:
    return [ListModel("\ufeffoffsets", 1, _s().String(), [["\ufeff", "a"], ["\ufeff\ufeff"]])]


def _zstd_keyed() -> list[KeyedModel]:
    s = _s()
    keys = [f"key-{i}" for i in range(64)]
    return [KeyedModel("checksummed", "value", s.String(), [(k, f"value {k} " * 20) for k in keys]),
            KeyedModel("no-content-size", "value", s.String(), [(k, f"value {k} " * 20) for k in keys]),
            KeyedModel("largest-window", "value", s.String(), [(k, f"value {k} " * 20) for k in keys]),
            KeyedModel("raw-and-rle-blocks", "value", s.Bytes(), [(k, b"\x00" * 300 + k.encode() + b"\x01" * 50)
                                                                   for k in keys[:8]])]


#: How each state of the zstd golden re-stores its chunks (every chunk is one frame).
ZSTD_FORMS = {
    "checksummed": lambda p: zstd_frame(p, checksum=True),
    "no-content-size": lambda p: zstd_frame(p, content_size=False),
    "largest-window": lambda p: zstd_frame(p, checksum=True, content_size=False, window_descriptor=WINDOW_2_27),
    "raw-and-rle-blocks": block_frame,
}


def _restore_zstd_forms(path: pathlib.Path, model: list[OperatorModel]) -> None:
    sp = Savepoint(path)
    for ks in sp.op("job").keyed_states:
        for chunk in ks.chunks:
            _recompress(chunk, ZSTD_FORMS[ks.name], _payload(sp, chunk))
    sp.save()


def _deep_list_keyed() -> list[KeyedModel]:
    s = _s()
    element = s.Int64()
    for _ in range(31):
        element = s.ListOf(element)

    def nested(v: int, depth: int):
        return v if depth == 1 else [nested(v, depth - 1)]

    return [KeyedModel("deep", "list", element, [("a", [nested(1, 32), nested(2, 32)]), ("b", [])])]


def _protobuf_keyed() -> list[KeyedModel]:
    """Values written as bytes; the manifest then names the protobuf message (below)."""
    s = _s()
    w, v = wire_files()
    return [KeyedModel("proto3", "value", s.Bytes(), [(what, value) for what, value in accepted_wire_forms()],
                       value_snapshot=protobuf_snapshot([w], "w.M")),
            KeyedModel("proto2", "value", s.Bytes(), [(what, value) for what, value in
                                                      accepted_wire_forms() + accepted_proto2_forms()],
                       value_snapshot=protobuf_snapshot([v], "v.M")),
            KeyedModel("descriptor-forms", "value", s.Bytes(), [("point", b"\x08\x01")],
                       value_snapshot=protobuf_snapshot([accepted_descriptor_forms()], "x.M"))]


def accepted_descriptor_forms():
    """A proto2 file using what a descriptor set may hold (§3.11.1): a group, an enum alias,
    a map field, a packed field, an extension range and an extension in it, a oneof, a
    default value, reserved numbers and names that no field uses."""
    d, F = _pb_descriptor(), _fdp()
    f = point_file("proto2")
    m = _message(f)
    _enum(f, 0, 0, alias=True)
    m.nested_type.add(name="G").field.add(name="x", number=1, type=F.TYPE_INT32, label=1)
    _add_field(f, "g", 3, F.TYPE_GROUP, type_name=".x.M.G")
    _map_entry(f)
    _add_field(f, "p", 4, F.TYPE_SINT64, 3, options=d.FieldOptions(packed=True))
    m.oneof_decl.add(name="choice")
    _add_field(f, "c1", 5, F.TYPE_STRING, oneof_index=0)
    _add_field(f, "c2", 6, F.TYPE_ENUM, type_name=".x.E", oneof_index=0, default_value="V1")
    m.extension_range.add(start=100, end=200)
    m.reserved_range.add(start=50, end=60)
    m.reserved_name.append("old")
    f.extension.add(name="ext", number=100, type=F.TYPE_INT32, label=1, extendee=".x.M")
    return f


def _name_protobuf_values(path: pathlib.Path, model: list[OperatorModel]) -> None:
    def change(manifest) -> None:
        for ks, km in zip(manifest.operators[0].keyed_states, model[0].keyed):
            ks.value_serializer.CopyFrom(km.value_snapshot)

    rewrite_manifest(path, change)


def golden_cases() -> list[Case]:
    return [
        _single_state("json-nesting-limit", "json values nested exactly 64 levels deep (arrays; objects and arrays), "
                      "brackets inside strings (not nesting): every reader reads them (spec/serializers.md §3.12)",
                      _json_keyed),
        _single_state("byte-order-mark-kept", "strings and names that start or end with U+FEFF (ef bb bf): keys, "
                      "values, list elements, state names, json strings; readers keep it "
                      "(spec/serializers.md §3.5, §3.12)", _bom_keyed, _bom_lists, operator_id="\ufeffjob"),
        _single_state("zstd-frame-forms", "zstd frames every reader accepts (spec/format.md §7.3): with a content "
                      "checksum, without the content size, with the largest window allowed (2^27 bytes, rule Z2), "
                      "of many raw and RLE blocks", _zstd_keyed, after=_restore_zstd_forms, inline_bytes=1 << 20),
        _single_state("list-state-value-serializer-32-deep", "a LIST state whose value (element) serializer is 32 "
                      "levels deep: the implied list wrapper does not count toward the limit (spec/serializers.md "
                      "§7)", _deep_list_keyed),
        _single_state("protobuf-wire-forms", "protobuf values in every wire form a reader accepts (spec/serializers.md "
                      "§3.11.2): wrong wire types and unknown fields kept, packed and unpacked, unknown enum values, "
                      "groups, nesting 100 deep, proto2 strings not checked, missing required fields; and a "
                      "descriptor set with what §3.11.1 allows (group, alias, map, packed, oneof, extensions, "
                      "reserved)",
                      _protobuf_keyed, after=_name_protobuf_values),
    ]


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def generate(golden_root: pathlib.Path, reject_root: pathlib.Path, only: list[str] | None = None) -> list[str]:
    goldens = [c.name for c in golden_cases() if not only or c.name in only]
    made = generate_goldens(golden_root, goldens, golden_cases) if goldens else []
    rejects = reject_cases()
    made += write_cases(reject_root, rejects, generate_reject, subdirectory=REJECT_SUBDIRECTORY, only=only)
    directory = reject_root / REJECT_SUBDIRECTORY
    write_readme(directory, "Reject corpus: reader rules made exact",
                 "Savepoints every reader of format 1.0 or later must refuse (the key-bounds case: 1.1 or later), "
                 "made by `compat_tests/generate_reader_rules.py` from the valid savepoint of "
                 "`generate_rejects.py`: zstd frames (spec/format.md §7.3), key groups, key bounds and the data-file "
                 "magic (§7.1, §7.6, §6.3), JSON nesting and byte order marks, map keys, tuple names, LIST nesting, "
                 "protobuf descriptor sets and wire forms (spec/serializers.md). Written once, hashed in "
                 "`../SHA256SUMS`.",
                 [(c.name, f"`{c.category}`", c.breaks) for c in rejects if (directory / c.name).exists()])
    return made


def _listing() -> list[str]:
    return [*(f"golden/1.0/{g.name}: {g.exercises}" for g in golden_cases()),
            *(f"reject/{REJECT_SUBDIRECTORY}/{c.name} [{c.category}]: {c.breaks}" for c in reject_cases())]


def main(argv: list[str] | None = None) -> int:
    return generator_main(argv, __doc__, GOLDEN_DIR, REJECT_DIR, _listing, generate)


if __name__ == "__main__":
    sys.exit(main())
