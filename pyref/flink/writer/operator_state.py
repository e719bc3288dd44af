"""Operator state of one subtask as Flink's ``DefaultOperatorStateBackend`` writes it;
the inverse of :mod:`pyref.flink.operator_state`.

The stream: the ``OperatorBackendSerializationProxy`` (int version 6 and a boolean
"compressed" (false); Flink 1.13 to 1.17 read only version 5, without it), a short count of list-state meta infos and the meta infos, a
short count of broadcast-state meta infos and those), then each list state's
elements back to back, each broadcast state as an int entry count and its (key,
value) pairs. The handle records the offset of every element, and of every
broadcast state's count; every state of the operator is in every subtask's
handle, with no offsets where the subtask holds nothing of it.

Which subtask holds what at the exported parallelism follows pyref's restore plan
(spec/redistribution.md): SPLIT_DISTRIBUTE elements cut as FLIP-8 does, each
subtask's copy of a broadcast state. UNION state is given whole to every subtask
on restore, so each element is written once: the elements pyref's partition ``j``
holds go to subtask ``j % parallelism``. A list state in pyref's BROADCAST mode
has no Flink counterpart (Flink's only BROADCAST state is the broadcast map).
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from ..._proto.savepoint.v1 import manifest_pb2 as pb
from ...errors import UnsupportedFormatError
from ...broadcast import BroadcastStateView
from ...reader import ListStateView, OperatorView
from ...redistribution import DistributionMode as PyrefMode
from ...restore import plan_list_state
from ..handles import DistributionMode
from ...serializers.base import binary_parts
from ..rows import join_rows
from ..to_flink import flink_serializer
from ..transcode import Transcoder, transcoder
from .meta_info import broadcast_meta_info, list_meta_info

__all__ = ["OperatorStateExport"]

#: OperatorBackendSerializationProxy versions: 6 (with "compressed") from Flink 1.18 on.
PROXY_VERSION, PROXY_VERSION_BEFORE_1_18 = 6, 5
_MODES = {PyrefMode.SPLIT_DISTRIBUTE: DistributionMode.SPLIT_DISTRIBUTE, PyrefMode.UNION: DistributionMode.UNION}


class OperatorStateExport:
    """An operator's list and broadcast states as Flink operator-state streams, one per
    subtask at ``parallelism``, for the Flink ``release`` (major, minor)."""

    def __init__(self, op: OperatorView, parallelism: int, release: tuple[int, int] = (2, 3)) -> None:
        self.operator = op
        self.parallelism = parallelism
        self.lists: list[tuple[ListStateView, DistributionMode, Transcoder, bytes]] = []
        for name in op.list_state_names:
            view = op.list_state(name)
            if view.mode not in _MODES:
                raise UnsupportedFormatError(f"a list state in {view.mode.name} mode: Flink's list states are "
                                             "SPLIT_DISTRIBUTE or UNION (its BROADCAST state is a map)",
                                             state=view.label)
            element = flink_serializer(view.proto.element_serializer, view.label, release=release)
            self.lists.append((view, _MODES[view.mode], transcoder(view.serializer, element.type, view.label),
                               list_meta_info(name, view.label, _MODES[view.mode].name, element)))
        self.broadcasts: list[tuple[BroadcastStateView, Transcoder, Transcoder, bytes]] = []
        for name in op.broadcast_state_names:
            broadcast = op.broadcast_state(name)
            key = flink_serializer(broadcast.proto.key_serializer, broadcast.label, release=release)
            value = flink_serializer(broadcast.proto.value_serializer, broadcast.label, release=release)
            where = broadcast.label
            self.broadcasts.append((broadcast, transcoder(broadcast.key_serializer, key.type, f"{where} (key)"),
                                    transcoder(broadcast.value_serializer, value.type, f"{where} (value)"),
                                    broadcast_meta_info(name, where, key, value)))
        header = (struct.pack(">i?", PROXY_VERSION, False) if release >= (1, 18)
                  else struct.pack(">i", PROXY_VERSION_BEFORE_1_18))
        self.proxy = (header + struct.pack(">h", len(self.lists)) + b"".join(m for *_, m in self.lists)
                      + struct.pack(">h", len(self.broadcasts)) + b"".join(m for *_, m in self.broadcasts))
        self._plan = plan_list_state(op.proto, parallelism) if self.has_state else {}

    @property
    def has_state(self) -> bool:
        return bool(self.lists or self.broadcasts)

    def _ranges(self, view, mode: DistributionMode, subtask: int) -> list[pb.ElementRange]:
        if mode is DistributionMode.UNION:
            partitions = view.proto.partitions
            return [r for j in range(subtask, len(partitions), self.parallelism) for r in partitions[j].ranges]
        return self._plan[view.name][subtask]

    def write(self, stream, subtask: int) -> dict[str, tuple[DistributionMode, tuple[int, ...]]]:
        """Write subtask ``subtask``'s stream; returns each state's mode and offsets."""
        stream.write(self.proxy)
        states = {}
        for view, mode, transcode, _ in self.lists:
            parts = list(view.read_encoded(self._ranges(view, mode, subtask)))
            elements = transcode(pa.concat_arrays(parts)) if parts else pa.array([], pa.binary())
            at = stream.tell()
            offsets = self._write_rows(stream, elements)
            states[view.name] = (mode, tuple((offsets[:-1] + at).tolist()))
        for broadcast, key, value, _ in self.broadcasts:
            keys, values = broadcast.encoded_entries(self._plan[broadcast.name][subtask])
            states[broadcast.name] = (DistributionMode.BROADCAST, (stream.tell(),))
            stream.write(struct.pack(">i", len(keys)))
            self._write_rows(stream, join_rows([key(keys), value(values)], len(keys)))
        return states

    @staticmethod
    def _write_rows(stream, column: pa.Array) -> np.ndarray:
        """Write the rows of a binary column back to back; their offsets from the first."""
        offsets, data = binary_parts(column)
        offsets = offsets.astype(np.int64)
        first = int(offsets[0]) if len(column) else 0
        stream.write(data[first:int(offsets[-1])] if len(column) else b"")
        return offsets - first
