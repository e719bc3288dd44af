"""Hand-made Flink bytes for pyref.flink's tests and benchmark: small writers
that follow Flink's write paths (DataOutput, serializer snapshots, _metadata,
state streams, snappy framing), so tests can build exact inputs and break
them. Not a Flink writer: only what the tests need."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import cramjam

from pyref.checksum import crc32c
from pyref.flink.dataoutput import string_value, varint  # noqa: F401  (re-exported for the tests)

P = "org.apache.flink.api.common.typeutils.base."
LONG = P + "LongSerializer$LongSerializerSnapshot"
INT = P + "IntSerializer$IntSerializerSnapshot"
STRING = P + "StringSerializer$StringSerializerSnapshot"
VOID_NS = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
TIME_WINDOW = "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot"


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def utf(s: str) -> bytes:
    """``writeUTF`` (plain UTF-8 is modified UTF-8 for text without NUL or astral chars)."""
    raw = s.encode("utf-8")
    return struct.pack(">H", len(raw)) + raw


# -- serializer snapshots ---------------------------------------------------

def snapshot(class_name: str, version: int = 3, body: bytes = b"") -> bytes:
    """``TypeSerializerSnapshot.writeVersionedSnapshot``."""
    return utf(class_name) + i32(version) + body


def proxied(versioned: bytes) -> bytes:
    """A top-level snapshot: the serialization proxy's version 2 first."""
    return i32(2) + versioned


def composite(class_name: str, nested: list[bytes], outer: bytes = b"", outer_version: int = 1) -> bytes:
    body = i32(911108) + i32(outer_version) + outer + i32(1333245) + i32(1) + i32(len(nested)) + b"".join(nested)
    return snapshot(class_name, 3, body)


def tuple_snapshot(fields: list[bytes], arity: int | None = None) -> bytes:
    return composite("org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot", fields,
                     utf(f"org.apache.flink.api.java.tuple.Tuple{arity or len(fields)}"), 2)


def list_snapshot(element: bytes) -> bytes:
    return composite(P + "ListSerializerSnapshot", [element])


def map_snapshot(key: bytes, value: bytes) -> bytes:
    return composite(P + "MapSerializerSnapshot", [key, value])


def ttl_snapshot(inner: bytes) -> bytes:
    return composite("org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot",
                     [snapshot(LONG), inner], outer_version=2)


def timer_snapshot(key: bytes, namespace: bytes) -> bytes:
    return composite("org.apache.flink.streaming.api.operators.TimerSerializerSnapshot", [key, namespace],
                     outer_version=2)


def optional_map(entries: list[tuple[str, bytes | None, bytes | None]]) -> bytes:
    out = i64(0x4F2C69A3D70) + i32(len(entries))
    for name, key, value in entries:
        out += utf(name)
        for frame in (key, value):
            out += b"\x00" if frame is None else b"\x01" + i32(len(frame)) + frame
    return out


def pojo_snapshot(pojo_class: str, fields: list[tuple[str, bytes]]) -> bytes:
    body = utf(pojo_class) + optional_map([(n, utf(pojo_class) + utf(n), s) for n, s in fields])
    body += optional_map([]) + optional_map([])
    return snapshot("org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot", 2, body)


def enum_snapshot(enum_class: str, symbols: list[str]) -> bytes:
    return snapshot(P + "EnumSerializer$EnumSerializerSnapshot", 3,
                    utf(enum_class) + i32(len(symbols)) + b"".join(utf(s) for s in symbols))


# -- state meta info and streams ---------------------------------------------

def meta_info(name: str, backend_type: int, options: dict[str, str], serializers: dict[str, bytes]) -> bytes:
    out = utf(name) + i32(backend_type) + i32(len(options))
    for k, v in options.items():
        out += utf(k) + utf(v)
    out += i32(len(serializers))
    for key, snapshot in serializers.items():
        out += utf(key) + proxied(snapshot)
    return out


def keyed_state_meta(name: str, kind: str, value: bytes, namespace: bytes | None = None) -> bytes:
    return meta_info(name, 0, {"KEYED_STATE_TYPE": kind},
                     {"NAMESPACE_SERIALIZER": namespace or snapshot(VOID_NS), "VALUE_SERIALIZER": value})


def timer_queue_meta(name: str, element: bytes) -> bytes:
    return meta_info(name, 3, {}, {"VALUE_SERIALIZER": element})


def keyed_proxy(key: bytes, states: list[bytes], compressed: bool = False) -> bytes:
    return i32(6) + bytes([compressed]) + proxied(key) + i16(len(states)) + b"".join(states)


def key_group_section(runs: list[tuple[int, list[tuple[bytes, bytes]]]]) -> bytes:
    """One key group: per state id its (key, value) pairs, the last pair of
    each run flagged, then the end mark."""
    out = bytearray()
    for state_id, pairs in runs:
        out += i16(state_id)
        for i, (key, value) in enumerate(pairs):
            if i == len(pairs) - 1:
                key = bytes([key[0] | 0x80]) + key[1:]
            out += i32(len(key)) + key + i32(len(value)) + value
    out += b"\xff\xff"
    return bytes(out)


def keyed_stream(proxy: bytes, groups: dict[int, bytes], compress: bool = False) -> tuple[bytes, dict[int, int]]:
    """The stream and each key group's offset."""
    out = bytearray(proxy)
    offsets = {}
    for kg in sorted(groups):
        offsets[kg] = len(out)
        out += framed(groups[kg]) if compress else groups[kg]
    return bytes(out), offsets


def operator_stream(list_states: list[tuple[bytes, list[bytes]]],
                    broadcast: Sequence[tuple[bytes, list[tuple[bytes, bytes]]]] = ()) -> tuple[bytes, list[list[int]]]:
    """An operator-state stream (uncompressed): (meta info, elements) per list
    state, then (meta info, entries) per broadcast state; returns the stream
    and each state's offsets in that order."""
    out = bytearray(i32(6) + b"\x00" + i16(len(list_states)) + b"".join(m for m, _ in list_states)
                    + i16(len(broadcast)) + b"".join(m for m, _ in broadcast))
    offsets = []
    for _, elements in list_states:
        offs = []
        for element in elements:
            offs.append(len(out))
            out += element
        offsets.append(offs)
    for _, entries in broadcast:
        offsets.append([len(out)])
        out += i32(len(entries)) + b"".join(k + v for k, v in entries)
    return bytes(out), offsets


# -- handles and metadata -----------------------------------------------------

def inline_handle(data: bytes, name: str = "inline") -> bytes:
    return b"\x01" + utf(name) + i32(len(data)) + data


def relative_handle(path: str, size: int) -> bytes:
    return b"\x06" + utf(path) + i64(size)


def savepoint_keyed_handle(first: int, offsets: list[int], stream: bytes) -> bytes:
    return b"\x07" + i32(first) + i32(len(offsets)) + b"".join(i64(o) for o in offsets) + stream


def operator_handle(states: dict[str, tuple[int, list[int]]], stream: bytes) -> bytes:
    out = b"\x04" + i32(len(states))
    for name, (mode, offsets) in states.items():
        out += utf(name) + bytes([mode]) + i32(len(offsets)) + b"".join(i64(o) for o in offsets)
    return out + stream


def segment_handle(start: int, size: int, path: str, scope: int = 1, file_id: str = "logical-file") -> bytes:
    """A ``SegmentFileStateHandle`` (file merging): ``size`` bytes at ``start`` of the merged file ``path``."""
    return b"\x0f" + i64(start) + i64(size) + i32(scope) + utf(path) + utf(file_id)


#: ``EmptySegmentFileStateHandle``: the stream of an empty file-merging operator handle.
EMPTY_SEGMENT = b"\x10"


def merging_operator_handle(states: dict[str, tuple[int, list[int]]], stream: bytes, *, empty: bool = False,
                            taskowned: str = "file:/cp/taskowned/tm", shared: str = "file:/cp/shared/op_0_1") -> bytes:
    """A ``FileMergingOperatorStreamStateHandle`` (type 17), or an empty one: an operator handle's states, the
    subtask's task-owned and shared directories, whether it is empty, and its segment."""
    return b"\x11" + operator_handle(states, b"")[1:] + utf(taskowned) + utf(shared) + bytes([empty]) + stream


def subtask(index: int, managed_operator: bytes | None = None, keyed: bytes | None = None,
            raw_keyed: bytes | None = None) -> bytes:
    out = i32(index)
    out += (i32(1) + managed_operator) if managed_operator else i32(0)
    out += i32(0)  # no raw operator state
    out += keyed or b"\x00"
    out += raw_keyed or b"\x00"
    return out + i32(0) + i32(0)  # no channel state


def operator(operator_id: bytes, parallelism: int, max_parallelism: int, subtasks: list[bytes],
             version: int = 4, name: str = "", uid: str = "", coordinator: bytes | None = None) -> bytes:
    out = (utf(name) + utf(uid)) if version >= 5 else b""
    out += operator_id + i32(parallelism) + i32(max_parallelism)
    out += coordinator if coordinator is not None else b"\x00"
    return out + i32(len(subtasks)) + b"".join(subtasks)


def metadata(operators: list[bytes], version: int = 4, checkpoint_id: int = 7,
             properties: bytes = b"\xac\xed\x00\x05t\x00\tCANONICAL") -> bytes:
    out = i32(0x4960672D) + i32(version) + i64(checkpoint_id) + i32(0) + i32(len(operators)) + b"".join(operators)
    return out + (properties if version >= 4 else b"")


# -- snappy framing -------------------------------------------------------------

def _masked(data: bytes) -> bytes:
    crc = crc32c(data)
    return struct.pack("<I", ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF)


def framed(data: bytes, chunk: int = 65536, header: bool = True) -> bytes:
    """Snappy framing format as xerial's SnappyFramedOutputStream writes it."""
    out = bytearray(b"\xff\x06\x00\x00sNaPpY" if header else b"")
    for i in range(0, len(data), chunk):
        piece = data[i:i + chunk]
        packed = bytes(cramjam.snappy.compress_raw(piece))
        kind, payload = (0, packed) if len(packed) < 0.85 * len(piece) else (1, piece)
        body = _masked(piece) + payload
        out += bytes([kind]) + len(body).to_bytes(3, "little") + body
    return bytes(out)
