"""Window serializers (spec §3.18, §3.19, format 1.2): the namespaces of windowed state.

``time-window`` is a window ``[start, end)`` in milliseconds, two i64; ``global-window``
is the one window that holds everything, a single zero byte.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from pyref._proto.savepoint.v1.serializer_pb2 import SerializerSnapshot
from pyref.errors import CorruptSavepointError, InvalidArgumentError

from .base import (
    Serializer,
    binary_input,
    check_builtin_snapshot,
    corrupt,
    fixed_width_binary,
    fixed_width_values,
    register_builtin,
)

__all__ = ["GlobalWindow", "TimeWindow", "Window"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class Window(NamedTuple):
    """A time window ``[start, end)``, milliseconds since the epoch."""

    start: int
    end: int


@register_builtin
class TimeWindow(Serializer):
    """A time window: i64 start, then i64 end, little-endian; 16 bytes (§3.18)."""

    serializer_id = "time-window"
    version = 1
    _layout = struct.Struct("<qq")
    _row = np.dtype([("start", "<i8"), ("end", "<i8")])

    @property
    def fixed_width(self) -> int:
        return 16

    def _bounds(self, value: Any) -> tuple[int, int]:
        if isinstance(value, Mapping):
            value = (value.get("start"), value.get("end"))
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or len(value) != 2:
            raise self._invalid(value, "expected (start, end)")
        for bound in value:
            if isinstance(bound, bool) or not isinstance(bound, (int, np.integer)) or not (
                    _INT64_MIN <= bound <= _INT64_MAX):
                raise self._invalid(value, "start and end are int64 milliseconds")
        return int(value[0]), int(value[1])

    def encode(self, value: Any) -> bytes:
        return self._layout.pack(*self._bounds(value))

    def _decode_range(self, mv: memoryview, start: int, end: int) -> Window:
        if end - start != 16:
            raise corrupt(self.serializer_id, f"expected exactly 16 bytes, got {end - start}", start)
        return Window(*self._layout.unpack_from(mv, start))

    def arrow_type(self) -> pa.DataType:
        return pa.struct([("start", pa.int64()), ("end", pa.int64())])

    def _to_arrow_value(self, value: Window) -> dict[Any, Any]:
        return {"start": value.start, "end": value.end}

    def _from_arrow_value(self, item: Any) -> Window:
        return Window(*self._bounds(item))

    def encode_array(self, values: Any) -> pa.Array:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not (isinstance(values, pa.StructArray) and values.type == self.arrow_type()):
            return super().encode_array(values)
        if values.null_count or values.field(0).null_count or values.field(1).null_count:
            raise InvalidArgumentError(f"{self.serializer_id} serializer cannot encode a null window")
        rows = np.empty(len(values), self._row)
        rows["start"] = values.field(0).to_numpy(zero_copy_only=False)
        rows["end"] = values.field(1).to_numpy(zero_copy_only=False)
        return fixed_width_binary(rows.view(np.uint8), len(values), 16)

    def decode_array(self, arr: pa.Array) -> pa.Array:
        arr = binary_input(arr, self.serializer_id)
        rows = fixed_width_values(arr, 16, self.serializer_id).view(self._row)
        return pa.StructArray.from_arrays([pa.array(rows["start"]), pa.array(rows["end"])], names=["start", "end"])

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> TimeWindow:
        check_builtin_snapshot(snapshot)
        return cls()


@register_builtin
class GlobalWindow(Serializer):
    """The global window: the single byte 0x00 (§3.19). Its Python value is None."""

    serializer_id = "global-window"
    version = 1

    @property
    def fixed_width(self) -> int:
        return 1

    def encode(self, value: Any) -> bytes:
        if value is not None:
            raise self._invalid(value, "the global window's value is None")
        return b"\x00"

    def _decode_range(self, mv: memoryview, start: int, end: int) -> None:
        if end - start != 1 or mv[start] != 0:
            raise corrupt(self.serializer_id, "expected the single byte 0x00", start)
        return None

    def arrow_type(self) -> pa.DataType:
        return pa.null()

    def encode_array(self, values: Any) -> pa.Array:
        n = len(values)
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            if values.null_count != n:
                raise InvalidArgumentError(f"{self.serializer_id} serializer encodes None only")
        elif any(v is not None for v in values):
            raise InvalidArgumentError(f"{self.serializer_id} serializer encodes None only")
        return fixed_width_binary(np.zeros(n, np.uint8), n, 1)

    def decode_array(self, arr: pa.Array) -> pa.Array:
        arr = binary_input(arr, self.serializer_id)
        raw = fixed_width_values(arr, 1, self.serializer_id)
        bad = np.flatnonzero(raw)
        if bad.size:
            raise CorruptSavepointError(f"{self.serializer_id}: record {int(bad[0])} is 0x{int(raw[bad[0]]):02x}, "
                                        "not 0x00")
        return pa.nulls(len(arr))

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> GlobalWindow:
        check_builtin_snapshot(snapshot)
        return cls()
