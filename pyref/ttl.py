"""State time-to-live (spec/format.md §7.8, format 1.2): the configuration, and the
last-access timestamp every stored value of a TTL state starts with.

A TTL cell is ``i64 LE last_access_ms || E(value)``: the value column of a VALUE,
REDUCING or AGGREGATING state, each map value of a MAP state, and each list element
of a LIST state (framed as one element, §4 of spec/serializers.md). The format keeps
the timestamps; expiring values is the restoring engine's business.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ._proto.savepoint.v1 import manifest_pb2 as pb
from .errors import CorruptSavepointError, InvalidArgumentError
from .serializers import ListOf, Serializer, migrate_array
from .serializers.base import binary_from_list, binary_input, binary_parts, corrupt

UPDATE_TYPES = {"on_create_and_write": pb.ON_CREATE_AND_WRITE, "on_read_and_write": pb.ON_READ_AND_WRITE}
VISIBILITIES = {"never_return_expired": pb.NEVER_RETURN_EXPIRED,
                "return_expired_if_not_cleaned_up": pb.RETURN_EXPIRED_IF_NOT_CLEANED_UP}
_TIMESTAMP = struct.Struct("<q")


@dataclass(frozen=True)
class TtlConfig:
    """A keyed state's time-to-live: ``ttl_ms``, which accesses renew it, and whether
    expired values may still be returned (Flink's StateTtlConfig)."""

    ttl_ms: int
    update_type: str = "on_create_and_write"
    visibility: str = "never_return_expired"

    def __post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or not 1 <= self.ttl_ms < 2**63:
            raise InvalidArgumentError(f"ttl_ms must be a positive int64, got {self.ttl_ms!r}")
        if self.update_type not in UPDATE_TYPES:
            raise InvalidArgumentError(f"update_type must be one of {sorted(UPDATE_TYPES)}")
        if self.visibility not in VISIBILITIES:
            raise InvalidArgumentError(f"visibility must be one of {sorted(VISIBILITIES)}")

    def to_proto(self) -> pb.TtlConfig:
        return pb.TtlConfig(ttl_ms=self.ttl_ms, update_type=UPDATE_TYPES[self.update_type],
                            visibility=VISIBILITIES[self.visibility])

    @classmethod
    def from_proto(cls, config: pb.TtlConfig) -> TtlConfig:
        """The configuration of a validated manifest (rule K8)."""
        names = {v: k for k, v in UPDATE_TYPES.items()}, {v: k for k, v in VISIBILITIES.items()}
        return cls(config.ttl_ms, names[0][config.update_type], names[1][config.visibility])


def ttl_problem(config: pb.TtlConfig) -> tuple[str, bool] | None:
    """What breaks rule K8 in ``config``: (reason, unsupported), or None."""
    if config.ttl_ms < 1:
        return f"TTL of {config.ttl_ms} ms (must be at least 1)", False
    for value, known, what in ((config.update_type, UPDATE_TYPES.values(), "update type"),
                               (config.visibility, VISIBILITIES.values(), "visibility")):
        if value == 0:
            return f"TTL {what} is unspecified", False
        if value not in known:
            return f"unknown TTL {what} {value}", True
    return None


class TtlValue(Serializer):
    """A TTL cell: the last-access timestamp (i64 LE), then the inner encoding unframed.
    Values are ``(timestamp, value)`` pairs. Never stored as a snapshot: the state's
    ``ttl`` says its values are TTL cells (spec/format.md §7.8)."""

    serializer_id = "ttl-value"  # not registered: no snapshot ever names it

    def __init__(self, inner: Serializer) -> None:
        self.inner = inner

    @property
    def fixed_width(self) -> int | None:
        width = self.inner.fixed_width
        return None if width is None else 8 + width

    @property
    def nested_serializers(self) -> tuple[Serializer, ...]:
        return (self.inner,)

    @property
    def depth(self) -> int:
        return self.inner.depth  # a cell layout, not a level of the snapshot tree

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, tuple) or len(value) != 2:
            raise self._invalid(value, "expected (timestamp, value)")
        timestamp, inner = value
        if isinstance(timestamp, bool) or not isinstance(timestamp, (int, np.integer)) or not (
                -(2**63) <= timestamp < 2**63):
            raise self._invalid(value, "the timestamp is int64 milliseconds")
        return _TIMESTAMP.pack(int(timestamp)) + self.inner.encode(inner)

    def _decode_range(self, mv: memoryview, start: int, end: int) -> tuple[int, Any]:
        if end - start < 8:
            raise corrupt("ttl", f"a TTL cell of {end - start} bytes has no 8-byte timestamp", start)
        return _TIMESTAMP.unpack_from(mv, start)[0], self.inner._decode_range(mv, start + 8, end)

    def arrow_type(self) -> pa.DataType:
        return pa.struct([("ttl_timestamp", pa.int64()), ("value", self.inner.arrow_type())])

    def _to_arrow_value(self, value: tuple[int, Any]) -> dict[Any, Any]:
        return {"ttl_timestamp": value[0], "value": self.inner._to_arrow_value(value[1])}

    def _from_arrow_value(self, item: dict[Any, Any]) -> tuple[int, Any]:
        return item["ttl_timestamp"], self.inner._from_arrow_value(item["value"])

    def value_converter(self, old: Serializer) -> Callable[[Any], Any] | None:
        convert = self.inner.value_converter(old.inner) if isinstance(old, TtlValue) else None
        return None if convert is None else lambda cell: (cell[0], convert(cell[1]))


def prefix_timestamps(timestamps: Any, encoded: pa.Array) -> pa.Array:
    """TTL cells from one timestamp per row and the rows' encodings, on whole buffers."""
    encoded = binary_input(encoded, "ttl")
    n = len(encoded)
    stamps = np.asarray(timestamps, dtype=np.int64)
    if stamps.shape != (n,):
        raise InvalidArgumentError(f"{len(stamps)} TTL timestamps for {n} values")
    offsets, data = binary_parts(encoded)
    lengths = np.diff(offsets).astype(np.int64)
    new_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths + 8, out=new_offsets[1:])
    out = np.empty(int(new_offsets[-1]), np.uint8)
    # Every row: 8 timestamp bytes at its new start, its value bytes right after.
    stamp_at = new_offsets[:-1, None] + np.arange(8)
    out[stamp_at.ravel()] = stamps.astype("<i8").view(np.uint8)
    offsets = offsets.astype(np.int64)
    source = np.arange(int(offsets[0]), int(offsets[-1]))
    out[source + np.repeat(new_offsets[:-1] + 8 - offsets[:-1], lengths)] = data[source]
    large = new_offsets[-1] > 2**31 - 1
    return pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), n,
                                 [None, pa.py_buffer(new_offsets.astype(np.int64 if large else np.int32)),
                                  pa.py_buffer(out)])


def split_timestamps(cells: pa.Array, where: str = "") -> tuple[np.ndarray, pa.Array]:
    """The timestamps and the value encodings of TTL cells, on whole buffers; a cell
    shorter than 8 bytes is corrupt."""
    cells = binary_input(cells, "ttl")
    n = len(cells)
    offsets, data = binary_parts(cells)
    offsets = offsets.astype(np.int64)
    lengths = np.diff(offsets)
    short = np.flatnonzero(lengths < 8)
    if short.size:
        raise CorruptSavepointError(f"TTL cell {int(short[0])} of {where or 'a TTL state'} has "
                                    f"{int(lengths[short[0]])} bytes, less than its 8-byte timestamp")
    stamps = data[(offsets[:-1, None] + np.arange(8)).ravel()].view("<i8").astype(np.int64) if n else np.zeros(0, np.int64)
    keep = np.ones(int(offsets[-1] - offsets[0]), bool)
    keep[(offsets[:-1, None] + np.arange(8) - offsets[0]).ravel()] = False
    values = data[int(offsets[0]):int(offsets[-1])][keep]
    value_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths - 8, out=value_offsets[1:])
    large = pa.types.is_large_binary(cells.type)
    return stamps, pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), n,
                                         [None, pa.py_buffer(value_offsets.astype(np.int64 if large else np.int32)),
                                          pa.py_buffer(values)])


def migrate_ttl_cells(old: Serializer, new: Serializer, cells: pa.Array, *, whole_lists: bool) -> pa.Array:
    """Re-encode the values of TTL cells from ``old`` to ``new``, keeping every timestamp:
    one TTL cell per row, or (``whole_lists``) one list of TTL elements per row."""
    if not whole_lists:
        stamps, values = split_timestamps(cells)
        return prefix_timestamps(stamps, migrate_array(old, new, values))
    migrate_array(old, new, pa.array([], pa.binary()))  # refuses an incompatible pair before any row
    source, target = ListOf.of_list_state(TtlValue(old)), ListOf.of_list_state(TtlValue(new))
    convert = target.value_converter(source) or (lambda cells: cells)
    return binary_from_list([target.encode(convert(source.decode(cell)))
                             for cell in binary_input(cells, "ttl").to_pylist()])
