"""Golden and reject cases of the manifest-level rules issue 13 made explicit (gaps an
independent reader found; spec/CHANGELOG.md lists them).

    python -m compat_tests.generate_spec_gaps_manifest          # the missing cases
    python -m compat_tests.generate_spec_gaps_manifest --list

Golden cases go to ``golden/<version>/manifest-rules-*`` (schema 2 dumps, also of 1.0
and 1.1 savepoints: they check last-row-wins through ``values``), reject cases to
``reject/manifest-rules/``. They are made as the other generators make theirs (their
checks; a case is written once, its files are added to ``SHA256SUMS``):

* protobuf encoding (spec/format.md §4.5): strings that are not UTF-8, numbers wider
  than their 32-bit field, fields written twice (merged), the last ``oneof`` member,
  explicit default values, unknown groups nested up to the limit of 100 levels and past it;
* features and ids (§5.1 M1, M2, §9.2): a registered optional feature listed as
  required, a registered required one listed as optional, ids and names of any form;
* checks before reading (§5.10): serializers and key hashes before any chunk, every
  listed base (used or not); unsupported before corrupt (§5.6);
* unreferenced chunks and unselected rows (§5.3), 1.1 rules on a 1.0 label (§5.6),
  the C4 size beyond 32 bits, locations that are no savepoint directory (§2), and the
  dump at parallelisms outside 1..max_parallelism (compat_tests/README.md).
"""

from __future__ import annotations

import pathlib
import shutil
import struct
import sys
from collections.abc import Callable

from compat_tests import GOLDEN_DIR, REJECT_DIR
from compat_tests._build import envelope, generator_main, rewrite_manifest, write_model
from compat_tests.canonical import KeyedModel, ListModel, OperatorModel
from compat_tests.generate_goldens import Case
from compat_tests.generate_goldens_1_2 import generate as generate_goldens
from compat_tests.generate_rejects import (
    RejectCase,
    Savepoint,
    _body,
    _file_chunk,
    _varint,
    generate_reject,
    inline_chunk,
    key_group_of,
    manifest_case,
    payload_of,
    snapshot,
    write_readme,
)
from compat_tests.generate_rejects_bounded_work import write_cases

REJECT_SUBDIR = "manifest-rules"
PREFIX = "manifest-rules-"
SPLIT, VALUE_KIND = 1, 1
#: Levels of message nesting a reader parses (spec/format.md §4.5 E5).
MAX_DEPTH = 100


def _s():
    from pyref import serializers

    return serializers


def _pb():
    from pyref._proto.savepoint.v1 import manifest_pb2

    return manifest_pb2


# --------------------------------------------------------------------------
# Wire-level helpers: what pyref's writer never produces
# --------------------------------------------------------------------------


def _field(number: int, wire_type: int, payload: bytes | int) -> bytes:
    """One protobuf field: a varint (wire type 0) or a length-delimited one (2)."""
    key = _varint(number << 3 | wire_type)
    if wire_type == 0:
        return key + _varint(payload)
    return key + _varint(len(payload)) + payload


def _groups(depth: int, number: int = 1000) -> bytes:
    """An unknown group field nesting ``depth`` groups (wire types 3 and 4)."""
    start, end = _varint(number << 3 | 3), _varint(number << 3 | 4)
    return start * depth + end * depth


def _replace_body(path: pathlib.Path, body: bytes) -> None:
    """``path/_manifest`` with ``body`` in a valid envelope, the version label kept."""
    manifest = path / "_manifest"
    major, minor = struct.unpack_from("<HH", manifest.read_bytes(), 8)
    manifest.write_bytes(envelope(body, major, minor))


def _widened(path: pathlib.Path, change) -> None:
    """Apply ``change`` to the manifest parsed with 64-bit-wide numbers, so that it can hold
    what a 32-bit field cannot (spec/format.md §4.5 E2)."""
    from pyref.manifest_encoding import _wide_manifest_class

    wide = _wide_manifest_class()()
    wide.ParseFromString(_body((path / "_manifest").read_bytes()))
    change(wide)
    _replace_body(path, wide.SerializeToString(deterministic=True))


# --------------------------------------------------------------------------
# Golden cases
# --------------------------------------------------------------------------


def _last_row_wins_ops() -> list[OperatorModel]:
    """Keys stored several times in one key group, across chunks (small chunks) and within
    one; float64 user keys 0.0 and -0.0 are two entries (identity by bytes)."""
    s = _s()
    keys = [f"k{i}" for i in range(12)]
    values = [(k, i) for i, k in enumerate(keys)] + [(k, 100 + i) for i, k in enumerate(keys[::2])]
    values += [(keys[0], 999)]
    lists = [(k, [i, i]) for i, k in enumerate(keys[:6])] + [(keys[1], [7]), (keys[2], [])]
    maps = [(k, float(u), 10 * i + u) for i, k in enumerate(keys[:4]) for u in range(3)]
    maps += [("k0", 0.0, 1000), ("k0", -0.0, 2000), ("k1", 1.0, 3000), ("k0", 0.0, 4000)]
    return [OperatorModel("counter", 2, 4, s.String(), keyed=[
        KeyedModel("latest", "value", s.Int64(), values),
        KeyedModel("history", "list", s.Int64(), lists),
        KeyedModel("by-score", "map", s.Int64(), maps, user_key_serializer=s.Float64()),
    ])]


def _simple_ops(parallelism: int = 2, max_parallelism: int = 128) -> list[OperatorModel]:
    s = _s()
    return [OperatorModel("source", parallelism, max_parallelism, None,
                          [ListModel("offsets", SPLIT, s.Int64(), [[1, 2, 3], [4, 5]][:parallelism])]),
            OperatorModel("counter", parallelism, max_parallelism, s.String(), [], [
                KeyedModel("count", "value", s.Int64(), [(f"key-{i}", i) for i in range(8)])])]


def _written(ops, after=None, *, model=None, **writer_options):
    """A case builder: write ``ops``, then ``after(savepoint_dir)``; the model of what the
    savepoint then holds is ``model`` (default: ``ops``)."""

    def build(case_dir: pathlib.Path) -> list[OperatorModel]:
        write_model(case_dir / "savepoint", ops, **writer_options)
        if after is not None:
            after(case_dir / "savepoint")
        return ops if model is None else model

    return build


def _variants_operator() -> bytes:
    """Operator ``variants`` as a foreign writer may encode it (spec/format.md §4.5): the key
    serializer in two occurrences (merged, E3), a chunk whose ``range`` (to no file) is
    followed by its ``inline_data`` (the last oneof member wins, E3), and fields written
    with their default value (E6): key group 0, codec NONE, range chunk 0 and first 0."""
    from pyref.checksum import crc32c

    s = _s()
    value_payload = payload_of([[s.String().encode(k) for k in ("a", "b")], [s.Int64().encode(v) for v in (1, 2)]])
    list_payload = payload_of([[s.Int64().encode(v) for v in (7, 8)]])

    def chunk(payload: bytes, rows: int) -> bytes:
        bogus_range = _field(1, 0, 99) + _field(2, 0, 8) + _field(3, 0, 5)  # FileRange to no data file
        return (_field(1, 0, 0) + _field(2, 0, rows) + _field(3, 2, bogus_range) + _field(4, 2, payload)
                + _field(5, 0, 0) + _field(6, 0, len(payload)) + b"\x3d" + struct.pack("<I", crc32c(payload)))

    int64 = _field(1, 2, b"int64") + _field(2, 0, 1)
    keyed = (_field(1, 2, b"v") + _field(2, 0, VALUE_KIND) + _field(3, 2, int64)
             + _field(5, 2, chunk(value_payload, 2)))
    element_range = _field(1, 0, 0) + _field(2, 0, 0) + _field(3, 0, 2)
    listed = (_field(1, 2, b"l") + _field(2, 0, SPLIT) + _field(3, 2, int64) + _field(4, 2, chunk(list_payload, 2))
              + _field(5, 2, _field(1, 2, element_range)))
    return (_field(1, 2, b"variants") + _field(3, 0, 1) + _field(4, 0, 1)
            + _field(5, 2, _field(1, 2, b"string")) + _field(5, 2, _field(2, 0, 1))  # one snapshot, two occurrences
            + _field(6, 2, listed) + _field(7, 2, keyed))


def _variants_ops() -> list[OperatorModel]:
    s = _s()
    return [*_simple_ops(), OperatorModel("variants", 1, 1, s.String(), [ListModel("l", SPLIT, s.Int64(), [[7, 8]])],
                                          [KeyedModel("v", "value", s.Int64(), [("a", 1), ("b", 2)])])]


def _append_to_body(extra) -> Callable:
    def after(path: pathlib.Path) -> None:
        _replace_body(path, _body((path / "_manifest").read_bytes()) + extra())

    return after


def _unreferenced(path: pathlib.Path) -> None:
    """source/offsets: a third, unreferenced chunk with a wrong CRC32C, and partition 1's
    chunk holding a third row, never selected, that is no int64 (3 bytes)."""
    s = _s()

    def change(m) -> None:
        state = next(o for o in m.operators if o.operator_id == "source").list_states[0]
        rows = [s.Int64().encode(4), s.Int64().encode(5), b"xyz"]
        state.chunks.append(inline_chunk(payload_of([rows]), 3))
        del state.partitions[1].ranges[:]
        state.partitions[1].ranges.add(chunk=len(state.chunks) - 1, first=0, count=2)
        damaged = inline_chunk(payload_of([[s.Int64().encode(6)]]), 1)
        damaged.crc32c ^= 1
        state.chunks.append(damaged)

    rewrite_manifest(path, change, minor=0)


def _ids_and_names(path: pathlib.Path) -> None:
    def change(m) -> None:
        m.savepoint_id = "not a UUID \u2603"
        m.optional_features.extend(["Not A Feature Name!", "external-bases"])  # ignored, whatever they say

    rewrite_manifest(path, change, minor=0)


def _unlisted_key_bounds(path: pathlib.Path) -> None:
    rewrite_manifest(path, lambda m: m.optional_features.remove("chunk-key-bounds"), minor=0)


def golden_cases() -> list[Case]:
    return [
        Case(PREFIX + "last-row-wins", "keys stored several times in a key group, across chunks and within one, "
             "VALUE, LIST and MAP (float64 user keys 0.0 and -0.0: two entries): schema 2 `values` check last row "
             "wins on a 1.0 savepoint (format.md §7.1)", _written(_last_row_wins_ops(), chunk_bytes=40,
                                                                  inline_bytes=64),
             (1, 2, 4), {"chunk_bytes": 40, "inline_bytes": 64}, "1.0"),
        Case(PREFIX + "last-row-wins-sorted", "the same keys sorted within their key groups (stable: the last "
             "row of a key still wins) with key bounds, format 1.1", _written(_last_row_wins_ops(), chunk_bytes=40,
                                                                               sort_keys=True),
             (1, 2, 4), {"chunk_bytes": 40, "sort_keys": True}, "1.1"),
        Case(PREFIX + "parallelisms-outside-range", "the dump at parallelisms 0 and 32769 (omitted for every "
             "operator) besides 2 (compat_tests/README.md, restore)", _written(_simple_ops()), (0, 2, 32769), {},
             "1.0"),
        Case(PREFIX + "protobuf-encoding-variants", "an operator encoded as other protobuf writers may: its key "
             "serializer in two occurrences (merged), a chunk whose range is followed by inline_data (the last "
             "oneof member wins), default values written explicitly (format.md §4.5 E3, E6)",
             _written(_simple_ops(), _append_to_body(lambda: _field(8, 2, _variants_operator())),
                      model=_variants_ops()), (1, 2), {},
             "1.0"),
        Case(PREFIX + f"unknown-groups-{MAX_DEPTH}-deep", f"an unknown group field nesting {MAX_DEPTH} levels, "
             "the deepest a reader must parse (format.md §4.5 E5)",
             _written(_simple_ops(), _append_to_body(lambda: _groups(MAX_DEPTH))), (1, 2), {}, "1.0"),
        Case(PREFIX + "unreferenced-chunk-and-rows", "a list chunk no range refers to, with a wrong CRC32C, and "
             "an unselected row that is no int64: neither is read (format.md §5.3)",
             _written(_simple_ops(), _unreferenced, inline_bytes=4096), (1, 2, 3), {"inline_bytes": 4096}, "1.0"),
        Case(PREFIX + "ids-and-feature-names", "a savepoint_id that is no UUID, an optional feature name of "
             "any characters and a registered required one listed as optional: readers check none of them "
             "(format.md §5.1 M1, M2, §9.2)", _written(_simple_ops(), _ids_and_names), (1, 2), {}, "1.0"),
        Case(PREFIX + "key-bounds-unlisted", "key bounds without `chunk-key-bounds` listed, labelled 1.0: a "
             "writer's slip, not a reader's error; the bounds mean what they always mean (format.md §5.6)",
             _written(_simple_ops(), _unlisted_key_bounds, sort_keys=True, chunk_bytes=40), (1, 2),
             {"sort_keys": True, "chunk_bytes": 40}, "1.0"),
    ]


# --------------------------------------------------------------------------
# Reject cases
# --------------------------------------------------------------------------


def _wide_case(name: str, breaks: str, change) -> RejectCase:
    return RejectCase(name, "corrupt", breaks, lambda case_dir: _widened(case_dir / "savepoint", change))


def _wide_parallelism(m) -> None:
    for op in m.operators:
        op.parallelism += 2**32  # cut to 32 bits, the savepoint would be valid


def _wide_codec(m) -> None:
    chunk = next(c for op in m.operators for s in op.keyed_states for c in s.chunks if c.codec == 0)
    chunk.codec = 2**32  # NONE (0) when cut to 32 bits


def _not_utf8(case_dir: pathlib.Path) -> None:
    sp = Savepoint(case_dir / "savepoint")
    sp.op("counter").operator_id = "counter-\u00ff"
    body = _body(sp.save())
    _replace_body(sp.path, body.replace("counter-\u00ff".encode(), b"counter-\xff\xff"))


def _deep_groups(case_dir: pathlib.Path) -> None:
    path = case_dir / "savepoint"
    _replace_body(path, _body((path / "_manifest").read_bytes()) + _groups(MAX_DEPTH + 1))


def _optional_as_required(sp: Savepoint) -> None:
    sp.manifest.required_features.append("chunk-key-bounds")


def _row_count_wraps(sp: Savepoint) -> None:
    """2 columns: 8 + 8 × (row_count + 1) is 2³² + 8, which wraps to 8 in 32 bits."""
    rows = 2**29 - 1
    payload = struct.pack("<II", rows, 2) + bytes(24)
    ks = sp.keyed("count")
    del ks.chunks[:]
    ks.chunks.append(inline_chunk(payload, rows, key_group_of("doc")))


def _unused_base(damage) -> Callable:
    """The shallow savepoint also lists ``extra``, a copy of its base that no chunk uses,
    then ``damage(extra_dir)``."""

    def mutate(case_dir: pathlib.Path) -> None:
        extra = case_dir / "extra"
        shutil.copytree(case_dir / "base", extra)
        sp = Savepoint(case_dir / "savepoint")
        sp.manifest.bases.add(directory="extra", savepoint_id=Savepoint(extra).manifest.savepoint_id)
        sp.save()
        damage(extra)

    return mutate


def _flip_manifest_byte(path: pathlib.Path) -> None:
    data = bytearray((path / "_manifest").read_bytes())
    data[20] ^= 0x01
    (path / "_manifest").write_bytes(bytes(data))


def _no_savepoint(replace) -> Callable:
    def mutate(case_dir: pathlib.Path) -> None:
        shutil.rmtree(case_dir / "savepoint")
        replace(case_dir / "savepoint")

    return mutate


def _inverted_bounds(sp: Savepoint) -> None:
    chunk = _file_chunk(sp)
    chunk.key_bounds.min, chunk.key_bounds.max = b"\xff", b"\x00"


def _unhashable_without_chunks(sp: Savepoint) -> None:
    op = sp.manifest.operators.add(operator_id="measure", parallelism=1, max_parallelism=8)
    op.key_serializer.CopyFrom(snapshot("float64"))
    op.keyed_states.add(name="by-reading", kind=VALUE_KIND).value_serializer.CopyFrom(snapshot("int64"))


def _unknown_serializer_and_damaged_chunk(sp: Savepoint) -> None:
    """A newer built-in on a list state without chunks (operator ``source``, dumped after
    ``counter``), and a chunk of ``counter`` whose CRC32C is wrong."""
    offsets = sp.list_state()
    offsets.element_serializer.CopyFrom(snapshot("int128"))
    del offsets.chunks[:]
    for partition in offsets.partitions:
        del partition.ranges[:]
    sp.keyed("count").chunks[0].crc32c ^= 1


def _unknown_codec_and_misordered(sp: Savepoint) -> None:
    """Rule C1 (unsupported) on one state, rule K4 (corrupt) on another."""
    sp.keyed("text").chunks[0].codec = 7
    chunks = sp.keyed("count").chunks
    first, last = chunks[0].key_group, chunks[-1].key_group
    chunks[0].key_group, chunks[-1].key_group = last, first


def reject_cases() -> list[RejectCase]:
    return [
        manifest_case("optional-feature-listed-as-required", "unsupported-feature", "`chunk-key-bounds`, a "
                      "registered optional feature, in required_features: no required feature any reader implements "
                      "(format.md §5.1 M1)", _optional_as_required),
        _wide_case("parallelism-wider-than-32-bits", "`parallelism` written as 2^32 + 2: cut to 32 bits it reads "
                   "as 2 and the savepoint is valid (format.md §4.5 E2)", _wide_parallelism),
        _wide_case("codec-wider-than-32-bits", "a chunk's codec (an enum, int32 on the wire) written as 2^32: cut "
                   "to 32 bits it reads as NONE (format.md §4.5 E2)", _wide_codec),
        RejectCase("operator-id-not-utf-8", "corrupt", "an operator_id whose bytes are not UTF-8 (format.md §4.5 "
                   "E1)", _not_utf8),
        RejectCase(f"unknown-groups-{MAX_DEPTH + 1}-deep", "corrupt", f"an unknown group field nesting "
                   f"{MAX_DEPTH + 1} levels, one more than a reader parses (format.md §4.5 E5)", _deep_groups),
        manifest_case("row-count-size-beyond-32-bits", "corrupt", "row_count 2^29 - 1 of 2 columns: the C4 "
                      "minimum 8 + 8 x (row_count + 1) is 2^32 + 8 (8 if computed in 32 bits) but raw_length is 32 "
                      "(format.md §5.5 C4)", _row_count_wraps),
        RejectCase("unused-base-manifest-damaged", "corrupt", "a listed base that no chunk uses has a damaged "
                   "_manifest (format.md §5.10, §8.2)", _unused_base(_flip_manifest_byte), derived=True),
        RejectCase("unused-base-missing", "corrupt", "a listed base that no chunk uses is missing (format.md §5.10, "
                   "§8.4)", _unused_base(shutil.rmtree), derived=True),
        RejectCase("location-missing", "not-found", "the location does not exist (format.md §2)",
                   _no_savepoint(lambda path: None)),
        RejectCase("location-is-a-file", "not-found", "the location is a regular file, not a directory "
                   "(format.md §2)", _no_savepoint(lambda path: path.write_bytes(b"not a savepoint\n"))),
        manifest_case("key-bounds-inverted-labelled-1-0", "corrupt", "key bounds with min > max in a savepoint "
                      "labelled 1.0 that does not list chunk-key-bounds: 1.1 rules apply by content (format.md "
                      "§5.6, K6)", _inverted_bounds, minor=0),
        manifest_case("unhashable-key-serializer-without-chunks", "unsupported-feature", "a float64 key "
                      "serializer of an operator whose keyed state has no chunk (format.md §5.2, §5.10)",
                      _unhashable_without_chunks),
        manifest_case("unknown-serializer-before-damaged-chunk", "unsupported-feature", "a newer built-in "
                      "serializer on a state without chunks, and a chunk with a wrong CRC32C: serializers are "
                      "checked before any chunk is read (format.md §5.10)", _unknown_serializer_and_damaged_chunk),
        manifest_case("unknown-codec-and-misordered-chunks", "unsupported-feature", "an unknown codec (rule C1) "
                      "and chunks out of key-group order (rule K4): unsupported before corrupt (format.md §5.6)",
                      _unknown_codec_and_misordered),
    ]


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def generate(golden_root: pathlib.Path, reject_root: pathlib.Path, only: list[str] | None = None) -> list[str]:
    golden = [c for c in golden_cases() if not only or c.name in only]
    made = generate_goldens(golden_root, [c.name for c in golden], lambda: golden) if golden else []
    rejects = [c for c in reject_cases() if not only or c.name in only]
    made += write_cases(reject_root, rejects, generate_reject, subdirectory=REJECT_SUBDIR)
    version_dir = reject_root / REJECT_SUBDIR
    write_readme(version_dir, "Reject corpus, manifest rules of issue 13",
                 "Savepoints every reader must refuse, for the manifest-level rules issue 13 made explicit "
                 "(spec/CHANGELOG.md), made by `compat_tests/generate_spec_gaps_manifest.py`; written once, hashed "
                 "in `../SHA256SUMS`.",
                 [(c.name, f"`{c.category}`", c.breaks) for c in reject_cases() if (version_dir / c.name).exists()])
    return made


def _listing() -> list[str]:
    return [*(f"golden/{g.format_version}/{g.name}: {g.exercises}" for g in golden_cases()),
            *(f"reject/{REJECT_SUBDIR}/{c.name} [{c.category}]: {c.breaks}" for c in reject_cases())]


def main(argv: list[str] | None = None) -> int:
    return generator_main(argv, __doc__, GOLDEN_DIR, REJECT_DIR, _listing, generate)


if __name__ == "__main__":
    sys.exit(main())
