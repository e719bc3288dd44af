"""The enum serializer (spec §3.17, format 1.2): an i32 ordinal into the snapshot's symbols.

Values are symbol names (``str``); a Python :class:`enum.Enum` member encodes as its name.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute is used below)

from pyref._proto.savepoint.v1.serializer_pb2 import SerializerSnapshot
from pyref.errors import CorruptSavepointError, InvalidArgumentError

from .base import (
    Compatibility,
    CompatibilityResult,
    Serializer,
    binary_input,
    check_builtin_snapshot,
    corrupt,
    different_ids,
    fixed_width_binary,
    fixed_width_values,
    is_text,
    register_builtin,
    serializer_from_snapshot,
)

__all__ = ["Enum"]

_I32 = struct.Struct("<i")


def _symbol_problem(symbols: Sequence[str]) -> str | None:
    """Why ``symbols`` cannot be an enum's symbols, or None (§3.17: non-empty, distinct, non-empty names)."""
    if not symbols:
        return "an enum needs at least one symbol"
    if any(not isinstance(s, str) or not s or not is_text(s) for s in symbols):
        return f"enum symbols must be non-empty strings of valid Unicode text, got {list(symbols)!r}"
    if len(set(symbols)) != len(symbols):
        return f"enum symbols must be distinct, got {list(symbols)!r}"
    return None


@register_builtin
class Enum(Serializer):
    """One of a fixed list of symbols, stored as its ordinal: 4 bytes, i32 little-endian (§3.17)."""

    serializer_id = "enum"
    version = 1

    def __init__(self, symbols: Sequence[str] | type[enum.Enum]) -> None:
        if isinstance(symbols, type) and issubclass(symbols, enum.Enum):
            symbols = [member.name for member in symbols]
        if isinstance(symbols, str) or not isinstance(symbols, Sequence):
            raise InvalidArgumentError("Enum expects a sequence of symbol names or an enum.Enum class")
        problem = _symbol_problem(symbols)
        if problem:
            raise InvalidArgumentError(problem)
        self.symbols: tuple[str, ...] = tuple(symbols)
        self._ordinals = {s: i for i, s in enumerate(self.symbols)}

    @property
    def fixed_width(self) -> int:
        return 4

    def encode(self, value: Any) -> bytes:
        name = value.name if isinstance(value, enum.Enum) else value
        if not isinstance(name, str) or name not in self._ordinals:
            raise self._invalid(value, f"not one of the symbols {list(self.symbols)}")
        return _I32.pack(self._ordinals[name])

    def _decode_range(self, mv: memoryview, start: int, end: int) -> str:
        if end - start != 4:
            raise corrupt(self.serializer_id, f"expected exactly 4 bytes, got {end - start}", start)
        (ordinal,) = _I32.unpack_from(mv, start)
        if not 0 <= ordinal < len(self.symbols):
            raise corrupt(self.serializer_id, f"ordinal {ordinal} outside the {len(self.symbols)} symbols", start)
        return self.symbols[ordinal]

    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def encode_array(self, values: Any) -> pa.Array:
        if not isinstance(values, (pa.Array, pa.ChunkedArray)):
            return super().encode_array(values)
        names = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        ordinals = pa.compute.index_in(names, value_set=pa.array(self.symbols, names.type))
        if ordinals.null_count:
            bad = int(np.flatnonzero(ordinals.is_null().to_numpy(zero_copy_only=False))[0])
            raise InvalidArgumentError(f"value {bad}: {names[bad].as_py()!r} is not one of the symbols "
                                       f"{list(self.symbols)}")
        return fixed_width_binary(ordinals.to_numpy().astype("<i4"), len(names), 4)

    def decode_array(self, arr: pa.Array) -> pa.Array:
        arr = binary_input(arr, self.serializer_id)
        ordinals = fixed_width_values(arr, 4, self.serializer_id).view("<i4")
        bad = np.flatnonzero((ordinals < 0) | (ordinals >= len(self.symbols)))
        if bad.size:
            i = int(bad[0])
            raise CorruptSavepointError(f"{self.serializer_id}: record {i} has ordinal {int(ordinals[i])}, outside "
                                        f"the {len(self.symbols)} symbols")
        return pa.array(self.symbols, pa.string()).take(pa.array(ordinals.astype(np.int32)))

    def snapshot(self) -> SerializerSnapshot:
        snap = super().snapshot()
        snap.symbols.extend(self.symbols)
        return snap

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> Enum:
        check_builtin_snapshot(snapshot, symbols=True)
        problem = _symbol_problem(list(snapshot.symbols))
        if problem:
            raise CorruptSavepointError(f"enum snapshot: {problem}")
        return cls(list(snapshot.symbols))

    def resolve_compatibility(self, old_snapshot: SerializerSnapshot) -> CompatibilityResult:
        """Appended symbols: as is. Reordered (every old symbol kept): after migration, the
        ordinals are rewritten by symbol name. A removed symbol: incompatible (§5.1)."""
        if old_snapshot.serializer_id != self.serializer_id:
            return different_ids(old_snapshot, self)
        old = serializer_from_snapshot(old_snapshot)
        assert isinstance(old, Enum)
        if self.symbols[:len(old.symbols)] == old.symbols:
            added = len(self.symbols) - len(old.symbols)
            return CompatibilityResult(Compatibility.COMPATIBLE_AS_IS, self,
                                       f"{added} symbols appended" if added else "same enum symbols")
        missing = [s for s in old.symbols if s not in self._ordinals]
        if missing:
            return CompatibilityResult(Compatibility.INCOMPATIBLE, self, f"enum symbols removed: {missing}")
        return CompatibilityResult(Compatibility.COMPATIBLE_AFTER_MIGRATION, self,
                                   "enum symbols reordered; ordinals are rewritten by symbol name")

    def __repr__(self) -> str:
        return f"Enum({list(self.symbols)!r})"
