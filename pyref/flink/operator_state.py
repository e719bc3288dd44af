"""Operator state (``DefaultOperatorStateBackend``): list and union list state,
and broadcast (map) state.

One stream per subtask: the ``OperatorBackendSerializationProxy`` (int
version 6 and, from meta-info version 7, a "compressed" boolean; a short count
of list-state meta infos; a short count of broadcast-state meta infos), then
each list state's elements back to back and each broadcast state as an int
entry count and (key, value) pairs. The handle records the offset of every
list element and of every broadcast state's start; elements are therefore
cut by offsets alone, with no serializer involved. When compressed, one Snappy
framed stream follows the metadata and every recorded offset is a chunk
boundary in it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .compression import decode_framed_indexed
from .datainput import DataInput
from .handles import DistributionMode, OperatorStateHandle
from .columns import gather_spans
from .meta_info import StateMetaInfo, looks_like_meta_info, read_state_meta_infos
from .serializers import FlinkType, Follow, at_position
from .values import Undelimited, codec_for

__all__ = ["OperatorBackendMeta", "OperatorStream", "read_operator_head", "read_operator_stream"]

OPERATOR_PROXY_VERSIONS = {1: 1, 2: 2, 3: 3, 4: 5, 5: 6, 6: 7}  # proxy version -> meta-info version


@dataclass(frozen=True)
class OperatorBackendMeta:
    compressed: bool
    list_states: list[StateMetaInfo]
    broadcast_states: list[StateMetaInfo]


@dataclass
class OperatorStream:
    """The decoded content of one subtask's operator-state stream."""

    meta: OperatorBackendMeta
    elements: dict[str, pa.BinaryArray]  # list state name -> element bytes, in order
    broadcast: dict[str, tuple[pa.BinaryArray, pa.BinaryArray]]  # name -> (keys, values)


def read_operator_head(inp: DataInput, proxy_end: int) -> OperatorBackendMeta:
    """The ``OperatorBackendSerializationProxy`` of a stream, ``inp`` up to ``proxy_end``."""
    start = inp.pos
    version = inp.read_int("operator backend proxy version")
    meta_version = OPERATOR_PROXY_VERSIONS.get(version)
    if meta_version is None or meta_version < 6:
        raise UnsupportedFormatError(
            f"operator backend metadata version {version}: only versions 5 and 6 (Flink 1.7 and later) are read",
            path=inp.path, byte_range=(inp.base + start, inp.base + start + 4))
    compressed = meta_version >= 7 and inp.read_bool("compression flag")

    def broadcast_follows(probe: DataInput) -> bool:
        count = probe.read_short("broadcast state count")
        if count == 0:
            return probe.pos == proxy_end
        return count > 0 and looks_like_meta_info(probe)

    list_states = read_state_meta_infos(inp, broadcast_follows, frozenset({"OPERATOR"}),
                                        "an operator backend's list states")
    broadcast_states = read_state_meta_infos(inp, at_position(proxy_end), frozenset({"BROADCAST"}),
                                             "an operator backend's broadcast states")
    return OperatorBackendMeta(compressed, list_states, broadcast_states)


def read_operator_stream(buffer, start: int, end: int, handle: OperatorStateHandle, name: str,
                         read_head: Callable[[DataInput, int], OperatorBackendMeta] = read_operator_head
                         ) -> OperatorStream:
    """Parse a subtask's operator-state stream ``buffer[start:end]``; ``read_head`` parses its head (a
    caller's may keep it: handles of other subtasks may name the same bytes)."""
    length = end - start
    all_offsets = sorted({o for info in handle.states.values() for o in info.offsets})
    if any(not 0 < o <= length for o in all_offsets):
        raise CorruptSavepointError(f"an operator state offset lies outside the {length}-byte stream", path=name)
    proxy_end = all_offsets[0] if all_offsets else length
    inp = DataInput(buffer, start, start + proxy_end, base=0, path=name)
    meta = read_head(inp, start + proxy_end)
    list_names = {m.name for m in meta.list_states}
    broadcast_types = {m.name: m.serializers for m in meta.broadcast_states}
    for state_name, info in handle.states.items():
        # The handle's mode and the stream's meta info must name the same kind of state.
        if state_name not in (broadcast_types if info.mode is DistributionMode.BROADCAST else list_names):
            found = ("a broadcast state" if state_name in broadcast_types else
                     "a list state" if state_name in list_names else "no state")
            raise CorruptSavepointError(f"_metadata gives operator state {state_name!r} mode {info.mode.name}, but "
                                        f"the stream's meta info has {found} of that name", path=name,
                                        state=state_name)

    if meta.compressed and all_offsets:
        data, index = decode_framed_indexed(buffer, start + proxy_end, end, base=0, path=name)
        try:
            position = {o: index[start + o] for o in all_offsets}
        except KeyError:
            raise CorruptSavepointError("an operator state offset is not at a compressed chunk boundary",
                                        path=name) from None
        payload, payload_end = np.frombuffer(data, np.uint8), len(data)
        origin, origin_at = f"{name} (decompressed)", 0  # what payload[0] is in, and where, for errors
    else:
        payload = np.frombuffer(memoryview(buffer)[start:end], np.uint8)
        position = {o: o for o in all_offsets}
        payload_end = length
        origin, origin_at = name, start  # a segment of a merged file starts anywhere in it

    def next_position(offset: int, own: set[int]) -> int:
        after = next_other_offset(all_offsets, offset, own)
        return payload_end if after is None else position[after]  # positions grow with offsets

    elements: dict[str, pa.BinaryArray] = {}
    broadcast: dict[str, tuple[pa.BinaryArray, pa.BinaryArray]] = {}
    for state_name, info in handle.states.items():
        if info.mode is DistributionMode.BROADCAST:
            types = broadcast_types[state_name]
            begin = position[info.offsets[0]] if info.offsets else payload_end
            stop = next_position(info.offsets[0], {info.offsets[0]}) if info.offsets else payload_end
            broadcast[state_name] = _read_broadcast(payload, begin, stop, types, origin, origin_at, state_name)
            continue
        starts = np.array([position[o] for o in info.offsets], np.int64)
        ends = np.empty_like(starts)
        if len(starts):
            ends[:-1] = starts[1:]
            ends[-1] = next_position(info.offsets[-1], set(info.offsets))
        if np.any(ends < starts):
            raise CorruptSavepointError("operator state element offsets go backwards", path=name, state=state_name)
        elements[state_name] = gather_spans(payload, starts, ends - starts)
    return OperatorStream(meta, elements, broadcast)


def next_other_offset(ordered: list[int], offset: int, own: set[int]) -> int | None:
    """The first of the sorted distinct ``ordered`` at or after ``offset`` that is not ``own`` (where a
    state's last element ends: another state's first offset), or None. Found by bisection: a scan of every
    offset per state was quadratic in a handle of thousands of states (1 MB of stream: 3.4 s, 4 MB: a minute).
    The offsets skipped are ``own``, each state's own: all states together skip each offset at most once."""
    i = bisect.bisect_left(ordered, offset)
    while i < len(ordered) and ordered[i] in own:
        i += 1
    return ordered[i] if i < len(ordered) else None


def _read_broadcast(payload: np.ndarray, begin: int, stop: int, types: dict[str, FlinkType],
                    path: str, base: int, state: str) -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """A broadcast state's map: int count, then (key, value) pairs; ``path``: the file (or decompressed
    stream) named in errors, ``base``: the offset of ``payload[0]`` in it."""
    key_codec = codec_for(types["KEY_SERIALIZER"])
    value_codec = codec_for(types["VALUE_SERIALIZER"])
    raw = payload[begin:stop].tobytes()
    inp = DataInput(raw, path=path, state=state, base=base + begin)
    count = inp.read_count("broadcast entry count")
    spans: list[tuple[int, int]] = []
    for i in range(count):
        for codec in (key_codec, value_codec):
            at = inp.pos
            try:
                codec.skip(inp)
            except Undelimited:
                if codec is value_codec and i == count - 1:
                    inp.pos = inp.end  # the last value may take the rest
                else:
                    raise UnsupportedFormatError(
                        f"broadcast state entries of {codec.type.describe()} cannot be told apart (the type has "
                        "no stored length)", path=path, state=state) from None
            spans.append((at, inp.pos))
    if not inp.at_end():
        raise inp.corrupt(f"{inp.remaining()} bytes after the last broadcast entry")
    data = np.frombuffer(raw, np.uint8)
    starts = np.array([s for s, _ in spans], np.int64).reshape(-1, 2) if spans else np.zeros((0, 2), np.int64)
    ends = np.array([e for _, e in spans], np.int64).reshape(-1, 2) if spans else np.zeros((0, 2), np.int64)
    keys = gather_spans(data, starts[:, 0], ends[:, 0] - starts[:, 0])
    values = gather_spans(data, starts[:, 1], ends[:, 1] - starts[:, 1])
    return keys, values
