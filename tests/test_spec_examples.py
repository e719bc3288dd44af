"""The worked examples of spec/format.md, produced by the library and compared to the spec.

Every annotated hex dump in spec/format.md follows a marker ``<!-- example: NAME -->``
and is rendered here from real library output (``encode_manifest``, ``encode_chunk``,
the serializers). The tests compare the bytes of each dump and then its whole text, so
the specification and the code cannot drift apart.

To regenerate the blocks after a deliberate change of the format or of an example::

    .venv/bin/python tests/test_spec_examples.py            # prints every block
    .venv/bin/python tests/test_spec_examples.py NAME       # prints one block

and paste the output between the fences that follow the marker.
"""

from __future__ import annotations

import re
import struct
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from google.protobuf import descriptor as _descriptor
from google.protobuf import text_format

from pyref import Savepoint
from pyref import manifest as manifest_module
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.checksum import crc32c
from pyref.chunk import decode_chunk, encode_chunk
from pyref.codecs import MAX_RAW_LENGTH, Codec
from pyref.errors import CorruptSavepointError
from pyref.key_groups import compute_key_groups, key_group_range
from pyref.manifest import (
    DATA_FILE_MAGIC,
    FORMAT_MAJOR,
    FORMAT_MINOR,
    KNOWN_OPTIONAL_FEATURES,
    KNOWN_REQUIRED_FEATURES,
    MAGIC,
    decode_manifest,
    encode_manifest,
)
from pyref.serializers import Int64, ListOf, String, TimeWindow, Window
from pyref.ttl import TtlConfig, TtlValue

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "spec" / "format.md"
README = ROOT / "spec" / "README.md"

_BLOCK = re.compile(r"<!-- example: ([a-z0-9-]+) -->\s*\n```[a-z]*\n(.*?)\n```", re.S)

# ---------------------------------------------------------------------------
# The examples
# ---------------------------------------------------------------------------

SAVEPOINT_ID = "3f2a6c1e-8b4d-4e7a-9c05-1d2e3f405162"
CREATED_BY = "pyref 0.1.0"
CREATED_AT_MS = 1735689600000  # 2025-01-01T00:00:00Z

#: §4.4: a source with two subtasks whose offsets [100, 101] and [200, 201] share one chunk.
OFFSETS = [100, 101, 200, 201]

#: §7.5: two keys of key group 20 (max parallelism 128) and their int64 values.
KEYED_ROWS = [("user-42", 7), ("user-204", 3)]


def list_chunk_payload() -> bytes:
    return encode_chunk([Int64().encode_array(pa.array(OFFSETS, pa.int64()))])


def example_manifest() -> pb.Manifest:
    payload = list_chunk_payload()
    chunk = pb.Chunk(row_count=len(OFFSETS), inline_data=payload, codec=pb.NONE, raw_length=len(payload),
                     crc32c=crc32c(payload))
    state = pb.ListState(
        name="offsets", mode=pb.SPLIT_DISTRIBUTE, element_serializer=Int64().snapshot(), chunks=[chunk],
        partitions=[pb.Partition(ranges=[pb.ElementRange(chunk=0, first=0, count=2)]),
                    pb.Partition(ranges=[pb.ElementRange(chunk=0, first=2, count=2)])])
    operator = pb.Operator(operator_id="source", parallelism=2, max_parallelism=128, list_states=[state])
    return pb.Manifest(savepoint_id=SAVEPOINT_ID, created_by=CREATED_BY, created_at_ms=CREATED_AT_MS,
                       operators=[operator])


def manifest_bytes() -> bytes:
    return encode_manifest(example_manifest())


def chunk_2x2_payload() -> bytes:
    return encode_chunk([pa.array([b"", b"xyz"]), pa.array([b"22", b"333"])])


def keyed_chunk_payload() -> bytes:
    keys = String().encode_array(pa.array([k for k, _ in KEYED_ROWS]))
    values = Int64().encode_array(pa.array([v for _, v in KEYED_ROWS], pa.int64()))
    return encode_chunk([keys, values])


# Format 1.2 (§7.7-§7.13): a windowed count of "user-42" and "user-204" (key group 20).
WINDOW_1, WINDOW_2 = Window(0, 60000), Window(60000, 120000)
NAMESPACED_ROWS = [("user-42", WINDOW_1, 7), ("user-42", WINDOW_2, 2), ("user-204", WINDOW_1, 3)]
LAST_ACCESS = 1735689600000  # 2025-01-01T00:00:00Z
TIMER_ROWS = [("user-42", WINDOW_1, 59999), ("user-42", WINDOW_2, 119999)]
RULES = [("deny", "/admin"), ("allow", "*")]
COORDINATOR = bytes.fromhex("0000000100000002")
ENGINE_OPERATOR_ID = bytes(range(16))


def _strings(values) -> pa.Array:
    return String().encode_array(pa.array(values))


def namespaced_chunk_payload() -> bytes:
    return encode_chunk([_strings([k for k, _, _ in NAMESPACED_ROWS]),
                         TimeWindow().encode_array([w for _, w, _ in NAMESPACED_ROWS]),
                         Int64().encode_array(pa.array([v for _, _, v in NAMESPACED_ROWS], pa.int64()))])


def ttl_chunk_payload() -> bytes:
    return encode_chunk([_strings(["user-42"]), pa.array([TtlValue(Int64()).encode((LAST_ACCESS, 7))])])


def ttl_list_cell() -> bytes:
    return ListOf(TtlValue(String())).encode([(LAST_ACCESS, "a"), (LAST_ACCESS + 1000, "bc")])


def timer_chunk_payload() -> bytes:
    return encode_chunk([_strings([k for k, _, _ in TIMER_ROWS]),
                         TimeWindow().encode_array([w for _, w, _ in TIMER_ROWS]),
                         Int64().encode_array(pa.array([ts for _, _, ts in TIMER_ROWS], pa.int64()))])


def broadcast_chunk_payload() -> bytes:
    return encode_chunk([_strings([k for k, _ in RULES]), _strings([v for _, v in RULES])])


def coordinator_chunk_payload() -> bytes:
    return encode_chunk([pa.array([COORDINATOR])])


def _inline(payload: bytes, rows: int, key_group: int = 0) -> pb.Chunk:
    return pb.Chunk(key_group=key_group, row_count=rows, inline_data=payload, raw_length=len(payload),
                    crc32c=crc32c(payload))


def example_manifest_1_2() -> pb.Manifest:
    window = TimeWindow().snapshot()
    count = pb.KeyedState(
        name="count", kind=pb.VALUE, value_serializer=Int64().snapshot(), namespace_serializer=window,
        ttl=TtlConfig(3_600_000).to_proto(),
        chunks=[_inline(encode_chunk([_strings(["user-42"]), TimeWindow().encode_array([WINDOW_1]),
                                      pa.array([TtlValue(Int64()).encode((LAST_ACCESS, 7))])]), 1, 20)])
    timers = pb.TimerService(
        name="window-timers", domain=pb.EVENT_TIME, namespace_serializer=window,
        chunks=[_inline(encode_chunk([_strings(["user-42"]), TimeWindow().encode_array([WINDOW_1]),
                                      Int64().encode_array(pa.array([59999], pa.int64()))]), 1, 20)])
    whole = [pb.ElementRange(chunk=0, first=0, count=1)]
    rules = pb.BroadcastState(
        name="rules", key_serializer=String().snapshot(), value_serializer=String().snapshot(),
        chunks=[_inline(encode_chunk([_strings(["deny"]), _strings(["/admin"])]), 1)],
        partitions=[pb.Partition(ranges=whole), pb.Partition(ranges=whole)])
    operator = pb.Operator(operator_id="windows", parallelism=2, max_parallelism=128,
                           key_serializer=String().snapshot(), keyed_states=[count], timer_services=[timers],
                           broadcast_states=[rules], coordinator_state=_inline(coordinator_chunk_payload(), 1),
                           uid="windowed-count", engine_operator_id=ENGINE_OPERATOR_ID)
    m = pb.Manifest(savepoint_id=SAVEPOINT_ID, created_by=CREATED_BY, created_at_ms=CREATED_AT_MS,
                    operators=[operator])
    manifest_module.declare_features(m)
    return m


def manifest_1_2_bytes() -> bytes:
    return encode_manifest(example_manifest_1_2())


# ---------------------------------------------------------------------------
# Rendering annotated hex dumps
#
# A dump line is ``OFFSET  HEX BYTES  | annotation``: OFFSET is the decimal offset of
# the line's first byte, at most 16 bytes per line; a value longer than that continues
# on lines with an empty annotation.
# ---------------------------------------------------------------------------

_WIRE = {0: "VARINT", 1: "I64", 2: "LEN", 5: "I32"}


class _Dump:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.items: list[tuple[int, int, int, str]] = []

    def add(self, start: int, end: int, depth: int, text: str) -> None:
        self.items.append((start, end, depth, text))

    def render(self) -> str:
        lines = []
        pos = 0
        for start, end, depth, text in self.items:
            assert start == pos, f"gap or overlap at {pos}..{start}"
            first = True
            while first or pos < end:
                stop = min(end, pos + 16)
                hexes = " ".join(f"{b:02x}" for b in self.data[pos:stop])
                note = ("  " * depth + text) if first else ""
                lines.append(f"{pos:4d}  {hexes:<47}  | {note}".rstrip())
                pos = stop
                first = False
        assert pos == len(self.data), "dump does not cover every byte"
        return "\n".join(lines)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _cell_items(dump: _Dump, start: int, depth: int, text) -> None:
    """Annotate one cell: ``text`` is a string for the whole cell, or (bytes, string) pieces."""
    if isinstance(text, str):
        return
    for size, piece in text:
        dump.add(start, start + size, depth, piece)
        start += size


def _chunk_items(dump: _Dump, start: int, depth: int, cell_text) -> None:
    """Annotate a chunk payload (§7) that begins at ``start``; ``cell_text(col, row, bytes)`` is
    the cell's text, or a list of (bytes, text) pieces it is made of."""
    data = dump.data
    rows, cols = struct.unpack_from("<II", data, start)
    dump.add(start, start + 4, depth, f"u32 row_count = {rows}")
    dump.add(start + 4, start + 8, depth, f"u32 column_count = {cols}")
    pos = start + 8
    offsets = []
    for c in range(cols):
        column = []
        for r in range(rows + 1):
            (off,) = struct.unpack_from("<I", data, pos)
            column.append(off)
            dump.add(pos, pos + 4, depth, f"column {c} offset[{r}] = {off}")
            pos += 4
        offsets.append(column)
    for c in range(cols):
        for r in range(rows):
            cell_start, cell_end = pos + offsets[c][r], pos + offsets[c][r + 1]
            text = cell_text(c, r, data[cell_start:cell_end])
            if isinstance(text, str):
                dump.add(cell_start, cell_end, depth, f"column {c} row {r}: {text}")
            else:
                first_size, first_text = text[0]
                _cell_items(dump, cell_start, depth, [(first_size, f"column {c} row {r}: {first_text}"), *text[1:]])
        pos += offsets[c][-1]


def _int64_cells(c, r, cell) -> str:
    return f"int64 {struct.unpack('<q', cell)[0]}"


def _message_items(dump: _Dump, start: int, end: int, desc, depth: int, cells=lambda path: _int64_cells,
                   path: tuple[str, ...] = ()) -> None:
    """Annotate the protobuf message of type ``desc`` in ``dump.data[start:end]``; the cells of an
    inline chunk reached by the field names ``path`` are annotated by ``cells(path)``."""
    data = dump.data
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        field = desc.fields_by_number[number]
        head = f"field {number} {_WIRE[wire]}"
        if wire == 0:
            value, pos = _varint(data, pos)
            shown = field.enum_type.values_by_number[value].name if field.enum_type else str(value)
            dump.add(field_start, pos, depth, f"{head}: {field.name} = {shown}")
        elif wire == 5:
            (value,) = struct.unpack_from("<I", data, pos)
            pos += 4
            dump.add(field_start, pos, depth, f"{head}: {field.name} = 0x{value:08x}")
        elif wire == 2:
            length, body = _varint(data, pos)
            pos = body + length
            if field.type == _descriptor.FieldDescriptor.TYPE_MESSAGE:
                dump.add(field_start, body, depth, f"{head}: {field.name}, {field.message_type.name} of {length} bytes")
                _message_items(dump, body, pos, field.message_type, depth + 1, cells, (*path, field.name))
            elif field.type == _descriptor.FieldDescriptor.TYPE_STRING:
                dump.add(field_start, pos, depth, f'{head}: {field.name} = "{data[body:pos].decode()}"')
            elif field.name == "inline_data":  # the stored bytes of a NONE chunk, i.e. a payload
                dump.add(field_start, body, depth, f"{head}: {field.name}, {length} bytes: the chunk payload (§7)")
                _chunk_items(dump, body, depth + 1, cells(path))
            else:
                dump.add(field_start, pos, depth, f"{head}: {field.name} = {data[body:pos].hex(' ')}")
        else:
            raise AssertionError(f"unexpected wire type {wire}")


def _render_envelope(data: bytes, cells=lambda path: _int64_cells, magic: str = "magic") -> str:
    """An annotated ``_manifest`` file: envelope (§4.1) and body."""
    dump = _Dump(data)
    major, minor, length = struct.unpack_from("<HHI", data, 8)
    dump.add(0, 8, 0, magic)
    dump.add(8, 10, 0, f"u16 format major version = {major}")
    dump.add(10, 12, 0, f"u16 format minor version = {minor}")
    dump.add(12, 16, 0, f"u32 body length N = {length}")
    _message_items(dump, 16, 16 + length, pb.Manifest.DESCRIPTOR, 1, cells)
    (crc,) = struct.unpack_from("<I", data, 16 + length)
    dump.add(16 + length, 20 + length, 0, f"u32 CRC32C of bytes 0..{16 + length - 1} = 0x{crc:08x}")
    return dump.render()


def render_manifest() -> str:
    return _render_envelope(manifest_bytes(), magic="magic: 0x89 'S' 'V' 'P' CR LF 0x1A LF")


def render_manifest_text() -> str:
    return text_format.MessageToString(example_manifest()).rstrip("\n")


def render_chunk_2x2() -> str:
    payload = chunk_2x2_payload()
    dump = _Dump(payload)
    _chunk_items(dump, 0, 0, lambda c, r, cell: f"{cell.decode()!r}" if cell else "'' (no bytes)")
    return dump.render()


def render_chunk_keyed() -> str:
    payload = keyed_chunk_payload()
    dump = _Dump(payload)
    _chunk_items(dump, 0, 0, lambda c, r, cell: (f'key "{cell.decode()}"' if c == 0
                                                 else f"value int64 {struct.unpack('<q', cell)[0]}"))
    return dump.render()


def _key(cell: bytes) -> str:
    return f'key "{cell.decode()}"'


def _window(cell: bytes) -> str:
    start, end = struct.unpack("<qq", cell)
    return f"namespace time-window [{start}, {end})"


def _ttl_pieces(cell: bytes, value_text) -> list[tuple[int, str]]:
    (stamp,) = struct.unpack_from("<q", cell)
    return [(8, f"TTL cell: i64 last_access_ms = {stamp}"), (len(cell) - 8, value_text(cell[8:]))]


def _int64(cell: bytes) -> str:
    return f"int64 {struct.unpack('<q', cell)[0]}"


def _render_payload(payload: bytes, cell_text) -> str:
    dump = _Dump(payload)
    _chunk_items(dump, 0, 0, cell_text)
    return dump.render()


def render_chunk_namespaced() -> str:
    return _render_payload(namespaced_chunk_payload(),
                           lambda c, r, cell: [_key, _window, lambda b: f"value {_int64(b)}"][c](cell))


def render_chunk_ttl() -> str:
    return _render_payload(ttl_chunk_payload(), lambda c, r, cell: _key(cell) if c == 0 else _ttl_pieces(
        cell, lambda b: f"value {_int64(b)}"))


def render_cell_ttl_list() -> str:
    cell = ttl_list_cell()
    dump = _Dump(cell)
    dump.add(0, 4, 0, f"u32 element count = {struct.unpack_from('<I', cell)[0]}")
    pos = 4
    for i in range(2):
        (length,) = struct.unpack_from("<I", cell, pos)
        dump.add(pos, pos + 4, 0, f"element {i}: u32 length = {length} (string has no fixed width)")
        _cell_items(dump, pos + 4, 1, _ttl_pieces(cell[pos + 4:pos + 4 + length],
                                                  lambda b: f"string {b.decode()!r}"))
        pos += 4 + length
    return dump.render()


def render_chunk_timers() -> str:
    return _render_payload(timer_chunk_payload(),
                           lambda c, r, cell: [_key, _window, lambda b: f"timestamp {_int64(b)}"][c](cell))


def render_chunk_broadcast() -> str:
    return _render_payload(broadcast_chunk_payload(), lambda c, r, cell: f'{("key", "value")[c]} "{cell.decode()}"')


def render_chunk_coordinator() -> str:
    return _render_payload(coordinator_chunk_payload(), lambda c, r, cell: "the coordinator's state (opaque bytes)")


def _manifest_1_2_cells(path: tuple[str, ...]):
    if path[-2:] == ("keyed_states", "chunks"):
        return lambda c, r, cell: [_key, _window, lambda b: _ttl_pieces(b, lambda v: f"value {_int64(v)}")][c](cell)
    if path[-2:] == ("timer_services", "chunks"):
        return lambda c, r, cell: [_key, _window, lambda b: f"timestamp {_int64(b)}"][c](cell)
    if path[-2:] == ("broadcast_states", "chunks"):
        return lambda c, r, cell: f'{("key", "value")[c]} "{cell.decode()}"'
    return lambda c, r, cell: "the coordinator's state (opaque bytes)"


def render_manifest_1_2() -> str:
    return _render_envelope(manifest_1_2_bytes(), _manifest_1_2_cells)


def render_manifest_1_2_text() -> str:
    return text_format.MessageToString(example_manifest_1_2()).rstrip("\n")


RENDERERS = {
    "chunk-namespaced": (render_chunk_namespaced, namespaced_chunk_payload),
    "chunk-ttl": (render_chunk_ttl, ttl_chunk_payload),
    "cell-ttl-list": (render_cell_ttl_list, ttl_list_cell),
    "chunk-timers": (render_chunk_timers, timer_chunk_payload),
    "chunk-broadcast": (render_chunk_broadcast, broadcast_chunk_payload),
    "chunk-coordinator": (render_chunk_coordinator, coordinator_chunk_payload),
    "manifest-1-2": (render_manifest_1_2, manifest_1_2_bytes),
    "manifest-1-2-text": (render_manifest_1_2_text, None),
    "manifest-envelope": (render_manifest, manifest_bytes),
    "manifest-text": (render_manifest_text, None),
    "chunk-2x2": (render_chunk_2x2, chunk_2x2_payload),
    "chunk-keyed": (render_chunk_keyed, keyed_chunk_payload),
}


# ---------------------------------------------------------------------------
# Reading the spec
# ---------------------------------------------------------------------------


def spec_blocks() -> dict[str, str]:
    text = SPEC.read_text(encoding="utf-8")
    blocks: dict[str, str] = {}
    for name, body in _BLOCK.findall(text):
        assert name not in blocks, f"example {name!r} appears twice in {SPEC}"
        blocks[name] = body
    return blocks


def parse_dump(block: str) -> bytes:
    """The bytes of an annotated dump; checks that every line's offset is right."""
    out = bytearray()
    for line in block.splitlines():
        left = line.split("|", 1)[0].split()
        if not left:
            continue
        offset, hexes = int(left[0]), left[1:]
        assert offset == len(out), f"line {line!r}: offset {offset}, expected {len(out)}"
        out += bytes.fromhex("".join(hexes))
    return bytes(out)


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------


def test_every_marked_example_has_a_renderer():
    assert set(spec_blocks()) == set(RENDERERS)


@pytest.mark.parametrize("name", sorted(name for name, (_, raw) in RENDERERS.items() if raw is not None))
def test_example_bytes_match_the_library(name):
    _, produce = RENDERERS[name]
    assert parse_dump(spec_blocks()[name]).hex(" ") == produce().hex(" ")


@pytest.mark.parametrize("name", sorted(RENDERERS))
def test_example_text_is_current(name):
    render, _ = RENDERERS[name]
    assert spec_blocks()[name] == render(), (
        f"spec/format.md example {name!r} is stale; regenerate it with "
        f"`.venv/bin/python tests/test_spec_examples.py {name}`")


def test_pinned_2x2_chunk():
    assert chunk_2x2_payload().hex() == ("02000000" "02000000" "00000000" "00000000" "03000000" "00000000"
                                         "02000000" "05000000" "78797a" "3232" "333333")
    columns = decode_chunk(chunk_2x2_payload(), expected_rows=2, expected_columns=2)
    assert [c.to_pylist() for c in columns] == [[b"", b"xyz"], [b"22", b"333"]]


def test_manifest_example_is_a_valid_savepoint(tmp_path):
    """§4.4 and §7.5: the example manifest opens, and its partitions resolve to the offsets."""
    manifest, version = decode_manifest(manifest_bytes(), path="_manifest")
    assert str(version) == "1.0"
    assert len(manifest_bytes()) == 16 + len(manifest.SerializeToString(deterministic=True)) + 4
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "_manifest").write_bytes(manifest_bytes())
    offsets = Savepoint.open(tmp_path / "sp").operator("source").list_state("offsets")
    assert [list(offsets.partition(i)) for i in range(2)] == [[100, 101], [200, 201]]
    # The step-by-step resolution of partition 1 in §7.5.
    payload = list_chunk_payload()
    row_count, column_count = struct.unpack_from("<II", payload, 0)
    off = struct.unpack_from(f"<{row_count + 1}I", payload, 8)
    data_start = 8 + 4 * column_count * (row_count + 1)
    assert (row_count, column_count, off, data_start) == (4, 1, (0, 8, 16, 24, 32), 28)
    elements = [struct.unpack("<q", payload[data_start + off[r]:data_start + off[r + 1]])[0] for r in (2, 3)]
    assert elements == [200, 201]


def test_key_lookup_example(tmp_path):
    """§7.5: both keys are in key group 20 at max parallelism 128, owned by subtask 0 of 3."""
    groups = compute_key_groups(pa.array([k for k, _ in KEYED_ROWS]), 128, "string")
    assert groups.tolist() == [20, 20]
    assert (key_group_range(128, 3, 0).first, key_group_range(128, 3, 0).last) == (0, 42)
    payload = keyed_chunk_payload()
    chunk = pb.Chunk(key_group=20, row_count=2, inline_data=payload, raw_length=len(payload), crc32c=crc32c(payload))
    state = pb.KeyedState(name="count", kind=pb.VALUE, value_serializer=Int64().snapshot(), chunks=[chunk])
    op = pb.Operator(operator_id="counter", parallelism=3, max_parallelism=128, key_serializer=String().snapshot(),
                     keyed_states=[state])
    m = pb.Manifest(savepoint_id=SAVEPOINT_ID, operators=[op])
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "_manifest").write_bytes(encode_manifest(m))
    view = Savepoint.open(tmp_path / "sp").operator("counter").keyed_state("count")
    assert view.get("user-42") == 7
    assert view.get("user-204") == 3
    assert view.get("user-43") is None


def test_key_bounds_example(tmp_path):
    """§7.6: the bounds pyref writes for the chunk of §7.5.3, and the byte order the spec states."""
    from pyref import SavepointWriter
    from pyref.serializers import Int32

    with SavepointWriter(str(tmp_path / "sp"), key_bounds=True) as w:
        op = w.add_operator("counter", 3, max_parallelism=128, key_serializer=String())
        op.keyed_state("count", Int64()).add([k for k, _ in KEYED_ROWS], [v for _, v in KEYED_ROWS])
    sp = Savepoint.open(tmp_path / "sp")
    assert (str(sp.version), list(sp.manifest.optional_features)) == ("1.1", ["chunk-key-bounds"])
    (chunk,) = sp.manifest.operators[0].keyed_states[0].chunks
    assert (chunk.key_group, chunk.key_bounds.min.hex(" "), chunk.key_bounds.max.hex(" ")) == (
        20, "75 73 65 72 2d 32 30 34", "75 73 65 72 2d 34 32")
    assert String().encode("user-7") > chunk.key_bounds.max
    assert Int32().encode(-1) > Int32().encode(1)
    view = sp.operator("counter").keyed_state("count")
    assert (view.get("user-42"), view.get("user-7")) == (7, None)


def test_manifest_1_2_example_is_a_valid_1_2_savepoint(tmp_path):
    """§7.13: the manifest opens, lists the features it uses and is labelled 1.2 (§9.4)."""
    manifest, version = decode_manifest(manifest_1_2_bytes(), path="_manifest")
    assert str(version) == "1.2"
    assert list(manifest.required_features) == ["timers", "broadcast-state", "coordinator-state", "keyed-namespaces",
                                                 "state-ttl", "serializers-1-2"]
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "_manifest").write_bytes(manifest_1_2_bytes())
    op = Savepoint.open(tmp_path / "sp").operator("windows")
    assert op.keyed_state("count").get("user-42", namespace=WINDOW_1, with_ttl=True) == (7, LAST_ACCESS)
    assert list(op.timer_service("window-timers").timers()) == [("user-42", WINDOW_1, 59999)]
    assert list(op.broadcast_state("rules").partitions()) == [{"deny": "/admin"}] * 2
    assert (op.coordinator_state, op.uid, op.engine_operator_id) == (COORDINATOR, "windowed-count", ENGINE_OPERATOR_ID)
    # Rule M9: the same manifest without one of its features is refused.
    del manifest.required_features[0]
    with pytest.raises(CorruptSavepointError, match="timers"):
        decode_manifest(encode_manifest(manifest), path="_manifest")


def test_crc32c_check_value():
    """§3: the CRC-32C check value, and the parameters named there."""
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0

    def bitwise(data: bytes) -> int:
        crc = 0xFFFFFFFF
        for byte in data:
            crc ^= byte
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        return crc ^ 0xFFFFFFFF

    for sample in (b"123456789", b"", manifest_bytes()[:-4], chunk_2x2_payload()):
        assert bitwise(sample) == crc32c(sample)


def test_constants_stated_in_the_spec():
    text = SPEC.read_text(encoding="utf-8")
    assert MAGIC.hex(" ") == "89 53 56 50 0d 0a 1a 0a"
    assert DATA_FILE_MAGIC.hex(" ") == "89 53 56 44 0d 0a 1a 0a"
    for magic in (MAGIC, DATA_FILE_MAGIC):
        assert magic.hex(" ").upper() in text
    # The status line names the newest format version, the one the library implements.
    status = re.search(r"^Status: normative\. Format version ([0-9]+)\.([0-9]+)", text, re.M)
    assert status and (int(status[1]), int(status[2])) == (FORMAT_MAJOR, FORMAT_MINOR)
    # The example of §4.4 uses no feature of a later minor version, so it is labelled 1.0 (§9.4).
    assert struct.unpack_from("<HH", manifest_bytes(), 8) == (1, 0)
    assert MAX_RAW_LENGTH == 2**31 - 1
    assert [(c.name, int(c)) for c in Codec] == [("NONE", 0), ("ZSTD", 1)]
    assert "0xE3069283" in text and "0x82F63B78" in text


def test_feature_registry_matches_the_reader():
    """§9.3 lists exactly the features the reference reader implements."""
    text = SPEC.read_text(encoding="utf-8")
    section = text.split("### 9.3", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (required|optional) \| ([0-9]+)\.([0-9]+) \|", section, re.M)
    assert {n for n, kind, _, _ in rows if kind == "required"} == set(KNOWN_REQUIRED_FEATURES)
    assert {n for n, kind, _, _ in rows if kind == "optional"} == set(KNOWN_OPTIONAL_FEATURES)
    since = {n: (int(major), int(minor)) for n, _, major, minor in rows}
    for name, minor in getattr(manifest_module, "FEATURE_MINOR", {}).items():
        assert since[name] == (FORMAT_MAJOR, minor), name


def _headings(path: Path) -> set[str]:
    return set(re.findall(r"^#{2,4} (?:Appendix )?([0-9A-Z]+(?:\.[0-9]+)*)[.:]? ", path.read_text(encoding="utf-8"),
                          re.M))


def test_section_references_resolve():
    """Every ``format.md §N`` cited by the code, the protos and the other chapters exists."""
    sections = _headings(SPEC)
    sources = [*ROOT.glob("pyref/**/*.py"), *ROOT.glob("proto/**/*.proto"), *ROOT.glob("spec/**/*.md"),
               *ROOT.glob("tests/*.py")]
    missing = set()
    for path in sources:
        text = path.read_text(encoding="utf-8")
        for ref in re.findall(r"format\.md(?:\)|`)?,? §([0-9]+(?:\.[0-9]+)*)", text):
            if ref not in sections:
                missing.add(f"{path.relative_to(ROOT)}: §{ref}")
        if path.name == "manifest.proto":  # bare § numbers in manifest.proto refer to format.md
            for ref in re.findall(r"\(§([0-9]+(?:\.[0-9]+)*)\)", text):
                if ref not in sections:
                    missing.add(f"{path.relative_to(ROOT)}: §{ref}")
    assert not missing, sorted(missing)


def _anchor(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_section_links_resolve():
    """Every link to a section of a chapter (``format.md#59-bounded-work``) names a heading it
    has: a renumbered section changes its anchor, and a stale link would still name the old
    number, which ``test_section_references_resolve`` cannot tell from a right one."""
    chapters = {path.name: {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", path.read_text(encoding="utf-8"), re.M)}
                for path in SPEC.parent.glob("*.md")}
    sources = [*SPEC.parent.glob("*.md"), ROOT / "README.md", *ROOT.glob("compat_tests/*.md"), *ROOT.glob("fuzz/*.md"),
               *ROOT.glob("pyref/**/*.py"), *ROOT.glob("proto/**/*.proto")]
    missing = set()
    for path in sources:
        for chapter, anchor in re.findall(r"\((?:[\w./-]*/)?([\w-]+\.md)#([\w-]+)\)", path.read_text(encoding="utf-8")):
            if chapter in chapters and anchor not in chapters[chapter]:
                missing.add(f"{path.relative_to(ROOT)}: {chapter}#{anchor}")
    assert not missing, sorted(missing)


def test_readme_lists_every_chapter():
    text = README.read_text(encoding="utf-8")
    for chapter in ("format.md", "key-groups.md", "redistribution.md", "serializers.md", "vectors/"):
        assert f"({chapter}" in text, chapter
    for word in ("MUST", "SHOULD", "MAY", "RFC 2119"):
        assert word in text


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(RENDERERS)
    for name in names:
        render, _ = RENDERERS[name]
        print(f"<!-- example: {name} -->\n```\n{render()}\n```\n")
