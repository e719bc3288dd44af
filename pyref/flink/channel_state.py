"""The in-flight data of an unaligned checkpoint: the channel state handles of a subtask
(``ChannelStateHandleSerializerV1`` / ``V2``, ``_metadata`` version 3 and later).

A checkpoint taken without aligning barriers keeps the buffers that were in flight when the
barrier overtook them: per subtask, the input channels' (``InputChannelStateHandle``: records
on their way into the operator) and the result subpartitions' (``ResultSubpartitionStateHandle``:
records the operator had emitted but not yet sent). They are read as what they are (how many
handles and channels, their bytes and files); their records are not decoded: they are network
buffers of the job's record serializers, not state, and pyref's format has no place for them.

A subtask state ends with two collections, input channels then result subpartitions, each an
int count and its handles. Version 3 to 5 (Flink 1.11 to 2.0): each handle is

    int subtask index, int gate (partition) index, int channel (subpartition) index,
    int offset count, that many long offsets, long state size, stream handle

(the offsets are those of the channel's buffers in the stream, the size their bytes). Version 6
and later (Flink 2.1+): each handle starts with a type byte, 1 input channel or 2 result
subpartition (then as above), 3 merged input channels or 4 merged result subpartitions:

    int subtask index, long state size, stream handle, int length, that many bytes

the bytes being an int channel count and per channel its two indices, long size, int offset
count and long offsets (``AbstractMergedChannelStateHandle``): every channel of a subtask in
one handle.
"""

from __future__ import annotations

from dataclasses import dataclass

from .datainput import DataInput
from .handles import StreamHandle, read_stream_handle

__all__ = ["ChannelStateHandle", "read_channel_state", "in_flight_summary"]

INPUT, OUTPUT = "input", "output"
#: ChannelStateHandleSerializerV2's type bytes: (direction, merged) of each.
_TYPES = {1: (INPUT, False), 2: (OUTPUT, False), 3: (INPUT, True), 4: (OUTPUT, True)}
#: The fewest bytes a handle takes: a merged one's type, subtask, size, null stream and empty channel list.
_MIN_HANDLE_BYTES = 1 + 4 + 8 + 1 + 4 + 4
#: A channel entry of a merged handle: two indices, size, offset count.
_MIN_CHANNEL_BYTES = 8 + 8 + 4


@dataclass(frozen=True)
class ChannelStateHandle:
    """One handle of in-flight data: ``direction`` ``input`` (input channels) or ``output``
    (result subpartitions), its channels as (gate, channel) or (partition, subpartition),
    the bytes of their buffers (``size``) in ``stream``, and whether it is a merged handle."""

    direction: str
    channels: tuple[tuple[int, int], ...]
    size: int
    stream: StreamHandle | None
    merged: bool = False


def _read_indices(inp: DataInput, what: str) -> tuple[int, int]:
    return inp.read_int(f"{what} gate index"), inp.read_int(f"{what} channel index")


def _read_offsets(inp: DataInput, what: str) -> None:
    """A channel's buffer offsets in its stream (checked, not kept)."""
    count = inp.read_count(f"{what} offset count", 8)
    at = inp.pos
    if any(inp.read_long(f"{what} offset") < 0 for _ in range(count)):
        raise inp.corrupt(f"{what}: negative buffer offset", at, 8 * count)


def _read_size(inp: DataInput, what: str) -> int:
    at = inp.pos
    size = inp.read_long(f"{what} state size")
    if size < 0:
        raise inp.corrupt(f"{what}: negative state size {size}", at, 8)
    return size


def _read_merged(inp: DataInput, direction: str, what: str) -> ChannelStateHandle:
    inp.read_int(f"{what} subtask index")
    size = _read_size(inp, what)
    stream = read_stream_handle(inp)
    length = inp.read_count(f"{what} channel offsets length")
    offsets = DataInput(inp.data, inp.pos, inp.pos + length, base=inp.base, path=inp.path)
    inp.skip(length, f"{what} channel offsets")
    channels = []
    for _ in range(offsets.read_count(f"{what} channel count", _MIN_CHANNEL_BYTES)):
        channels.append(_read_indices(offsets, what))
        _read_size(offsets, what)
        _read_offsets(offsets, what)
    if not offsets.at_end():
        raise offsets.corrupt(f"{what}: {offsets.remaining()} trailing bytes after the channel offsets",
                              offsets.pos, offsets.remaining())
    return ChannelStateHandle(direction, tuple(channels), size, stream, merged=True)


def _read_handle(inp: DataInput, direction: str, what: str, version: int) -> ChannelStateHandle:
    if version >= 6:
        at = inp.pos
        kind = inp.read_ubyte(f"{what} handle type")
        kind_direction, merged = _TYPES.get(kind, (None, False))
        if kind_direction != direction:
            raise inp.corrupt(f"unknown {what} state handle type {kind}", at, 1)
        if merged:
            return _read_merged(inp, direction, what)
    inp.read_int(f"{what} subtask index")
    channel = _read_indices(inp, what)
    _read_offsets(inp, what)
    return ChannelStateHandle(direction, (channel,), _read_size(inp, what), read_stream_handle(inp))


def read_channel_state(inp: DataInput, direction: str, version: int) -> tuple[ChannelStateHandle, ...]:
    """A subtask's collection of input channel (``direction`` ``input``) or result subpartition
    (``output``) state handles."""
    what = "input channel" if direction == INPUT else "result subpartition"
    count = inp.read_count(f"{what} state count", _MIN_HANDLE_BYTES)
    return tuple(_read_handle(inp, direction, what, version) for _ in range(count))


def in_flight_summary(handles: tuple[ChannelStateHandle, ...]) -> dict[str, int]:
    """Handles, channels and bytes of in-flight data, per direction (``input_bytes``...), and the
    files holding them (``files``: one may hold several subtasks' and operators')."""
    summary = {"files": len({h.stream.location for h in handles if h.stream is not None and h.stream.kind != "inline"})}
    for direction in (INPUT, OUTPUT):
        mine = [h for h in handles if h.direction == direction]
        summary[f"{direction}_handles"] = len(mine)
        summary[f"{direction}_channels"] = sum(len(h.channels) for h in mine)
        summary[f"{direction}_bytes"] = sum(h.size for h in mine)
    return summary
