"""Keyed state of a HashMap (heap) backend checkpoint (``HeapSnapshotStrategy``),
decoded into the rows the savepoint reader yields.

A heap checkpoint's keyed stream starts like a savepoint's (the
``KeyedBackendSerializationProxy``); its key groups are the heap state tables'
own layout, not the savepoint format: at each key group's offset (every key group
has one) the int key group, then per state, in an order of Flink's choosing, [a new
Snappy framed stream when compressed] the short state id, an int count and that
many entries: for key/value state namespace, key and the state as the state's
serializer writes it (a LIST state's whole list, a MAP state's whole map); for a
priority queue (timers) the elements. Nothing carries a length: an entry is found
by stepping over each value with its type's codec, so a state whose values have no
stored length (Kryo, a user's serializer) cannot be read, nor the states after it.
Blocks of the common types are walked arithmetically instead (:mod:`pyref.flink.heap_walk`),
falling back to the per-entry read, and its errors, when the bytes are not as assumed.

Each entry becomes the RocksDB-format rows of :mod:`pyref.flink.keyed` (key-group
prefix, key, namespace [and user key]; LIST elements joined by ``,``; one MAP row per
entry with its null flag), so views, verification and import read both alike.

Which layout a checkpoint's ``KeyGroupsStateHandle`` holds is not in ``_metadata``:
:func:`keyed_layout` tells from the head of each key group.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .composite import LIST_DELIMITER
from .compression import STREAM_IDENTIFIER, decode_framed
from .datainput import DataInput
from .heap_walk import BlockWalker, block_walker
from .keyed import KeyedBackendMeta, KeyedRows, KeyedSubtask, batched_sections, section_bounds
from .meta_info import StateMetaInfo
from .serializers import FlinkType
from .values import Codec, Undelimited, codec_for

__all__ = ["HEAP", "SAVEPOINT_FORMAT", "keyed_layout", "iter_heap_subtask", "StateDecoder"]

HEAP = "heap"
SAVEPOINT_FORMAT = "savepoint-format"
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">H")
_EMPTY = bytes(4)  # an entry count of 0


def _heap_head(buffer, at: int, stop: int, key_group: int, states: int, compressed: bool) -> bool:
    """Does the key group at ``at`` start as the heap backend writes it?"""
    if at + 4 > stop or _INT.unpack_from(buffer, at)[0] != key_group:
        return False
    if compressed:
        return bytes(buffer[at + 4:at + 4 + len(STREAM_IDENTIFIER)]) == STREAM_IDENTIFIER
    return at + 6 <= stop and _SHORT.unpack_from(buffer, at + 4)[0] < states


def _savepoint_head(buffer, at: int, stop: int, key_group: int, states: int, compressed: bool,
                    prefix_bytes: int) -> bool:
    """Does the key group at ``at`` start as the savepoint format (``FullSnapshotAsyncWriter``) writes it?"""
    if compressed:
        return bytes(buffer[at:at + len(STREAM_IDENTIFIER)]) == STREAM_IDENTIFIER
    if at + 6 + prefix_bytes > stop or _SHORT.unpack_from(buffer, at)[0] >= states:
        return False
    if _INT.unpack_from(buffer, at + 2)[0] < prefix_bytes:
        return False
    stored = buffer[at + 6] & 0x7F  # the top bit may mark the last pair before a new state id
    if prefix_bytes == 2:
        stored = (stored << 8) | buffer[at + 7]
    return stored == key_group


def keyed_layout(buffer, start: int, end: int, key_groups: range, offsets: tuple[int, ...], meta: KeyedBackendMeta,
                 prefix_bytes: int, name: str) -> str:
    """:data:`HEAP` or :data:`SAVEPOINT_FORMAT` for a checkpoint's keyed stream ``buffer[start:end]``.

    The heap backend gives every key group an offset and starts it with its key group as an
    int; the savepoint format gives offsets to key groups with data only, each starting with a
    state id and a key prefixed with the key group. Every key group must agree on one; bytes
    that fit both (possible only for a range of very few key groups) are refused, not guessed."""
    present = [(kg, o) for kg, o in zip(key_groups, offsets) if o]
    if not present:
        return SAVEPOINT_FORMAT  # nothing to read either way
    states = len(meta.states)
    bounds = {kg: (o, stop) for kg, o, stop in section_bounds(dict(present), end - start, name, start)}
    heap = len(present) == len(key_groups) and all(
        _heap_head(buffer, start + o, start + stop, kg, states, meta.compressed) for kg, (o, stop) in bounds.items())
    unified = all(_savepoint_head(buffer, start + o, start + stop, kg, states, meta.compressed, prefix_bytes)
                  for kg, (o, stop) in bounds.items())
    if heap and unified:
        raise UnsupportedFormatError(
            f"checkpoint keyed state of key groups {key_groups.start}..{key_groups.stop - 1}: its bytes fit both the "
            "heap backend's layout and the savepoint format, and _metadata does not say which it is; take a "
            "canonical savepoint", path=name)
    if heap:
        return HEAP
    if unified:
        return SAVEPOINT_FORMAT
    raise CorruptSavepointError(f"checkpoint keyed state of key groups {key_groups.start}..{key_groups.stop - 1} is "
                                "neither in the heap backend's layout nor in the savepoint format", path=name)


def _variable_int(value: int) -> bytes:
    """``CompositeKeySerializationUtils.writeVariableIntBytes``: little-endian bytes until the rest is zero."""
    out = bytearray([value & 0xFF])
    value >>= 8
    while value:
        out.append(value & 0xFF)
        value >>= 8
    return bytes(out)


class StateDecoder:
    """Turns one state's heap entries into savepoint-format (key, value) rows; the changelog
    (:mod:`pyref.flink.changelog`) steps over its changes' keys, namespaces and values with it too.
    ``writer`` names what wrote the values, for the refusal of a type stored without its length."""

    def __init__(self, info: StateMetaInfo, key_codec: Codec, prefix_bytes: int,
                 writer: str = "a heap (HashMap backend) checkpoint") -> None:
        self.info = info
        self.writer = writer
        self.prefix_bytes = prefix_bytes
        self.key_codec = key_codec
        value = info.serializers["VALUE_SERIALIZER"]
        self.timers = info.backend_type == "PRIORITY_QUEUE"
        self.kind = info.options.get("KEYED_STATE_TYPE", info.backend_type)
        self.value_codec = codec_for(value)
        self.walker: BlockWalker | None
        if self.timers:
            self.walker = block_walker("TIMERS", None, key_codec.type, value)
            return
        namespace = info.serializers["NAMESPACE_SERIALIZER"]
        self.namespace_codec = codec_for(namespace)
        self.ambiguous = key_codec.type.length < 0 and namespace.length < 0
        if self.kind == "LIST":
            self.element = self._child(value, "list", 0)
        elif self.kind == "MAP":
            self.user_key, self.user_value = self._child(value, "map", 0), self._child(value, "map", 1)
        # Key and namespace both of variable size put their lengths in the composite key: per entry.
        self.walker = None if self.ambiguous else block_walker(self.kind, namespace, key_codec.type, value)

    def _child(self, value: FlinkType, kind: str, index: int) -> Codec:
        if value.kind != kind:
            raise UnsupportedFormatError(f"{self.kind} state {self.info.name!r} holds {value.describe()}, not a "
                                         f"{kind}", state=self.info.name)
        return codec_for(value.children[index])

    def span(self, inp: DataInput, codec: Codec) -> bytes:
        """The bytes of one value of ``codec``'s type at ``inp``, stepped over."""
        start = inp.pos
        try:
            codec.skip(inp)
        except Undelimited:
            raise UnsupportedFormatError(
                f"keyed state {self.info.name!r} of {self.writer} holds {codec.type.describe()} values, which "
                "are written without their length, so neither they nor what follows them can be found; take a "
                "canonical savepoint, or a checkpoint of a job whose state types have Flink serializers",
                path=inp.path, state=self.info.name) from None
        return bytes(inp.data[start:inp.pos])

    def composite(self, prefix: bytes, key: bytes, namespace: bytes) -> bytes:
        """RocksDB's composite key of ``key`` and ``namespace`` after the key-group ``prefix``."""
        if self.ambiguous:  # key and namespace both of variable size: each followed by its length
            return prefix + key + _variable_int(len(key)) + namespace + _variable_int(len(namespace))
        return prefix + key + namespace

    def read(self, inp: DataInput, key_group: int, keys: list[bytes], values: list[bytes]) -> None:
        """One state's block of a key group (after its state id): int count, entries."""
        prefix = key_group.to_bytes(self.prefix_bytes, "big")
        for _ in range(inp.read_count(f"{self.info.name} entry count")):
            if self.timers:
                keys.append(prefix + self.span(inp, self.value_codec))
                values.append(b"")
                continue
            namespace = self.span(inp, self.namespace_codec)
            composite = self.composite(prefix, self.span(inp, self.key_codec), namespace)
            if self.kind == "LIST":
                elements = [self.span(inp, self.element) for _ in range(inp.read_count("list length"))]
                if elements:  # RocksDB keeps no empty list; the heap backend does not either
                    keys.append(composite)
                    values.append(bytes([LIST_DELIMITER]).join(elements))
            elif self.kind == "MAP":
                for _ in range(inp.read_count("map size")):
                    user_key = self.span(inp, self.user_key)
                    null = inp.read_bool("map value null flag")
                    keys.append(composite + user_key)
                    values.append(b"\x01" if null else b"\x00" + self.span(inp, self.user_value))
            else:
                keys.append(composite)
                values.append(self.span(inp, self.value_codec))


class _StateRows:
    """One state's rows of a run of key groups, in stream order: Arrow columns of blocks a
    :class:`~pyref.flink.heap_walk.BlockWalker` cut, between lists of the per-entry path's rows."""

    def __init__(self) -> None:
        self.chunks: list[tuple[np.ndarray, pa.BinaryArray, pa.BinaryArray]] = []
        self.groups: list[int] = []
        self.keys: list[bytes] = []
        self.values: list[bytes] = []

    def _flush(self) -> None:
        if self.keys:
            self.chunks.append((np.array(self.groups, np.int64), pa.array(self.keys, pa.binary()),
                                pa.array(self.values, pa.binary())))
            self.groups, self.keys, self.values = [], [], []

    def add(self, key_group: int, keys: pa.BinaryArray, values: pa.BinaryArray) -> None:
        self._flush()
        self.chunks.append((np.full(len(keys), key_group, np.int64), keys, values))

    def block(self, decoder: StateDecoder, inp: DataInput, key_group: int) -> None:
        """One state's block of a key group (after its state id): a walk when it holds, else per entry."""
        if decoder.walker is not None and isinstance(inp.data, bytes):
            walked = decoder.walker.rows(inp.data, inp.pos, inp.end, key_group, decoder.prefix_bytes)
            if walked is not None:
                keys, values, inp.pos = walked
                self.add(key_group, keys, values)
                return
        before = len(self.keys)
        decoder.read(inp, key_group, self.keys, self.values)
        self.groups.extend([key_group] * (len(self.keys) - before))

    def rows(self, subtask: int) -> KeyedRows:
        self._flush()
        if not self.chunks:
            empty = pa.array([], pa.binary())
            return KeyedRows(np.zeros(0, np.int64), np.zeros(0, np.int64), empty, empty)
        groups = np.concatenate([g for g, _, _ in self.chunks])
        keys = pa.concat_arrays([k for _, k, _ in self.chunks])
        values = pa.concat_arrays([v for _, _, v in self.chunks])
        return KeyedRows(np.full(len(groups), subtask, np.int64), groups, keys, values)


def _key_group_blocks(buffer, start: int, bounds: tuple[int, int, int], meta: KeyedBackendMeta,
                      decoders: list[StateDecoder], rows: list[_StateRows], name: str) -> None:
    key_group, offset, stop = bounds
    at = start + offset
    head = DataInput(buffer, at, start + stop, path=name)
    if head.read_int("key group") != key_group:
        raise head.corrupt(f"key group {key_group} does not start with its number", at, 4)
    if meta.compressed:
        inp = DataInput(decode_framed(buffer, at + 4, start + stop, path=name), path=f"{name} (key group {key_group}, "
                        "decompressed)")
    else:  # its own bytes (the walks index bytes fastest), errors still at the file's offsets
        inp = DataInput(bytes(buffer[at + 4:start + stop]), base=at + 4, path=name)
    seen: set[int] = set()
    while not inp.at_end():
        state_at = inp.pos
        state_id = inp.read_ushort("state id")
        if state_id >= len(decoders) or state_id in seen:
            raise inp.corrupt(f"key group {key_group}: state id {state_id} is not one of the {len(decoders)} states "
                              "or comes twice", state_at, 2)
        seen.add(state_id)
        if inp.data[inp.pos:inp.pos + 4] == _EMPTY:  # most states hold nothing in most key groups
            inp.pos += 4
            continue
        rows[state_id].block(decoders[state_id], inp, key_group)
    if len(seen) != len(decoders):
        raise CorruptSavepointError(f"key group {key_group} holds {len(seen)} of the {len(decoders)} states",
                                    path=name, byte_range=(at, start + stop))


def iter_heap_subtask(buffer, start: int, end: int, subtask: int, key_groups: range, offsets: tuple[int, ...],
                      name: str, prefix_bytes: int, batch_bytes: int | None,
                      meta: KeyedBackendMeta) -> Iterator[KeyedSubtask]:
    """One subtask's heap checkpoint stream as runs of whole key groups of about ``batch_bytes``
    stored bytes (None: one run), like :func:`pyref.flink.keyed.iter_keyed_subtask`."""
    key_codec = codec_for(meta.key_type)
    decoders = [StateDecoder(info, key_codec, prefix_bytes) for info in meta.states]
    bounds = section_bounds({kg: o for kg, o in zip(key_groups, offsets) if o}, end - start, name, start)
    for run in batched_sections(bounds, batch_bytes):
        rows = [_StateRows() for _ in decoders]
        for b in run:
            _key_group_blocks(buffer, start, b, meta, decoders, rows, name)
        yield KeyedSubtask(subtask, key_groups, meta.key_type,
                           {info.name: (info, r.rows(subtask)) for info, r in zip(meta.states, rows)})
