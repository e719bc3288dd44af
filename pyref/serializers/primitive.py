"""Primitive serializers: int32, int64, float64, boolean, string, bytes (spec §3.1-§3.6)
and, since format 1.2, int8, int16, float32 and char (§3.13-§3.16).

Their ``encode_array`` / ``decode_array`` work on whole Arrow buffers through
numpy views: no Python code runs per record.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from pyref._proto.savepoint.v1.serializer_pb2 import SerializerSnapshot
from pyref.errors import CorruptSavepointError, InvalidArgumentError

from .base import (
    CompatibilityResult,
    Compatibility,
    Serializer,
    binary_input,
    check_builtin_snapshot,
    corrupt,
    fixed_width_binary,
    fixed_width_values,
    register_builtin,
    serializer_from_snapshot,
)

__all__ = ["Boolean", "Bytes", "Char", "Float32", "Float64", "Int8", "Int16", "Int32", "Int64", "String"]


def _arrow_input(serializer: Serializer, values: Any) -> pa.Array:
    """``values`` as one pyarrow Array (Python sequences are converted with type inference)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if isinstance(values, pa.Array):
        return values
    if isinstance(values, (str, bytes, bytearray)):
        raise InvalidArgumentError(
            f"{serializer.serializer_id}: encode_array expects a sequence of values, "
            f"got {type(values).__name__}"
        )
    try:
        return pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise InvalidArgumentError(
            f"{serializer.serializer_id} serializer cannot encode these values: {e}"
        ) from e


def _no_nulls(serializer: Serializer, arr: pa.Array) -> None:
    if arr.null_count:
        first = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise InvalidArgumentError(
            f"{serializer.serializer_id} serializer cannot encode None (value {first}); "
            f"wrap it in Nullable"
        )


class _Primitive(Serializer):
    """A leaf serializer without configuration and with vectorised array paths."""

    _vectorised = True
    _arrow: pa.DataType

    def arrow_type(self) -> pa.DataType:
        return self._arrow

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> Serializer:
        check_builtin_snapshot(snapshot)
        return cls()

    def _cast_input(self, values: Any, accept: Callable[[pa.DataType], bool]) -> pa.Array:
        arr = _arrow_input(self, values)
        if not (accept(arr.type) or (pa.types.is_null(arr.type) and len(arr) == 0)):
            raise InvalidArgumentError(
                f"{self.serializer_id} serializer cannot encode values of Arrow type {arr.type}"
            )
        _no_nulls(self, arr)
        try:
            return arr.cast(self._arrow)
        except pa.ArrowException as e:
            raise InvalidArgumentError(f"{self.serializer_id} serializer cannot encode these values: {e}") from e


class _FixedNumber(_Primitive):
    _width: int
    _dtype: np.dtype  # little-endian dtype of the encoding
    _struct: struct.Struct

    @property
    def fixed_width(self) -> int:
        return self._width

    def _check_value(self, value: Any) -> Any:
        raise NotImplementedError

    def encode(self, value: Any) -> bytes:
        return self._struct.pack(self._check_value(value))

    def _decode_range(self, mv: memoryview, start: int, end: int) -> Any:
        if end - start != self._width:
            raise corrupt(
                self.serializer_id,
                f"expected exactly {self._width} bytes, got {end - start}",
                start,
            )
        return self._struct.unpack_from(mv, start)[0]

    def _accept(self, t: pa.DataType) -> bool:
        raise NotImplementedError

    def encode_array(self, values: Any) -> pa.Array:
        arr = self._cast_input(values, self._accept)
        n = len(arr)
        if n == 0:
            return pa.array([], type=pa.binary())
        native = arr.to_numpy(zero_copy_only=False)
        data = native.astype(self._dtype, copy=False)
        return fixed_width_binary(data, n, self._width)

    def decode_array(self, arr: pa.Array) -> pa.Array:
        arr = binary_input(arr, self.serializer_id)
        raw = fixed_width_values(arr, self._width, self.serializer_id)
        return pa.array(raw.view(self._dtype).astype(self._dtype.newbyteorder("=")), type=self._arrow)


class _Integer(_FixedNumber):
    _min: int
    _max: int

    def _check_value(self, value: Any) -> int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise self._invalid(value)
        v = int(value)
        if not self._min <= v <= self._max:
            raise InvalidArgumentError(
                f"{self.serializer_id} serializer cannot encode {v}: outside {self._min}..{self._max}"
            )
        return v

    def _accept(self, t: pa.DataType) -> bool:
        return pa.types.is_integer(t)


@register_builtin
class Int32(_Integer):
    """32-bit signed integer, 4 bytes little-endian two's complement (§3.1)."""

    serializer_id = "int32"
    version = 1
    _width = 4
    _dtype = np.dtype("<i4")
    _struct = struct.Struct("<i")
    _arrow = pa.int32()
    _min, _max = -(2**31), 2**31 - 1


@register_builtin
class Int64(_Integer):
    """64-bit signed integer, 8 bytes little-endian two's complement (§3.2)."""

    serializer_id = "int64"
    version = 1
    _width = 8
    _dtype = np.dtype("<i8")
    _struct = struct.Struct("<q")
    _arrow = pa.int64()
    _min, _max = -(2**63), 2**63 - 1

    def resolve_compatibility(self, old_snapshot: SerializerSnapshot) -> CompatibilityResult:
        if old_snapshot.serializer_id == "int32":
            serializer_from_snapshot(old_snapshot)  # validates the old snapshot
            return CompatibilityResult(
                Compatibility.COMPATIBLE_AFTER_MIGRATION,
                self,
                "int32 values widen to int64; the 4-byte encodings are rewritten as 8 bytes",
            )
        return super().resolve_compatibility(old_snapshot)


@register_builtin
class Float64(_FixedNumber):
    """IEEE 754 binary64, 8 bytes little-endian (§3.3)."""

    serializer_id = "float64"
    version = 1
    _width = 8
    _dtype = np.dtype("<f8")
    _struct = struct.Struct("<d")
    _arrow = pa.float64()

    def _check_value(self, value: Any) -> float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (float, int, np.floating, np.integer)
        ):
            raise self._invalid(value)
        try:
            return float(value)
        except OverflowError as e:
            raise self._invalid(value, str(e)) from e

    def _accept(self, t: pa.DataType) -> bool:
        return pa.types.is_floating(t) or pa.types.is_integer(t)


@register_builtin
class Boolean(_FixedNumber):
    """One byte: 0x00 false, 0x01 true; any other byte is corrupt (§3.4)."""

    serializer_id = "boolean"
    version = 1
    _width = 1
    _dtype = np.dtype("u1")
    _arrow = pa.bool_()

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (bool, np.bool_)):
            raise self._invalid(value)
        return b"\x01" if value else b"\x00"

    def _decode_range(self, mv: memoryview, start: int, end: int) -> bool:
        if end - start != 1:
            raise corrupt(self.serializer_id, f"expected exactly 1 byte, got {end - start}", start)
        b = mv[start]
        if b > 1:
            raise corrupt(self.serializer_id, f"byte 0x{b:02x} is neither 0x00 nor 0x01", start)
        return b == 1

    def _accept(self, t: pa.DataType) -> bool:
        return pa.types.is_boolean(t)

    def encode_array(self, values: Any) -> pa.Array:
        arr = self._cast_input(values, self._accept)
        n = len(arr)
        if n == 0:
            return pa.array([], type=pa.binary())
        data = arr.to_numpy(zero_copy_only=False).astype(np.bool_, copy=False).view(np.uint8)
        return fixed_width_binary(data, n, 1)

    def decode_array(self, arr: pa.Array) -> pa.Array:
        arr = binary_input(arr, self.serializer_id)
        raw = fixed_width_values(arr, 1, self.serializer_id)
        bad = np.flatnonzero(raw > 1)
        if bad.size:
            i = int(bad[0])
            raise CorruptSavepointError(
                f"{self.serializer_id}: record {i} byte 0x{int(raw[i]):02x} is neither 0x00 nor 0x01"
            )
        return pa.array(raw.view(np.bool_), type=pa.bool_())


def _first_invalid_utf8(arr: pa.Array) -> tuple[int, UnicodeDecodeError]:
    """Locate the first record that is not valid UTF-8 (error path only)."""
    for i, b in enumerate(arr.to_pylist()):
        try:
            b.decode("utf-8")
        except UnicodeDecodeError as e:
            return i, e
    raise AssertionError("no invalid record found")  # pragma: no cover


@register_builtin
class String(_Primitive):
    """UTF-8 text; the bytes must be valid UTF-8 (§3.5)."""

    serializer_id = "string"
    version = 1
    _arrow = pa.string()

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, str):
            raise self._invalid(value)
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise self._invalid(value, f"not encodable as UTF-8 ({e.reason})") from e

    def _decode_range(self, mv: memoryview, start: int, end: int) -> str:
        try:
            return str(mv[start:end], "utf-8")
        except UnicodeDecodeError as e:
            raise corrupt(self.serializer_id, f"invalid UTF-8 ({e.reason})", start + e.start) from None

    def encode_array(self, values: Any) -> pa.Array:
        arr = _arrow_input(self, values)
        if pa.types.is_null(arr.type) and len(arr) == 0:
            return pa.array([], type=pa.binary())
        if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            raise InvalidArgumentError(
                f"string serializer cannot encode values of Arrow type {arr.type}"
            )
        _no_nulls(self, arr)
        try:
            arr.validate(full=True)
        except pa.ArrowException as e:
            raise InvalidArgumentError(f"string serializer: input array is invalid: {e}") from e
        return arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())

    def decode_array(self, arr: pa.Array) -> pa.Array:
        arr = binary_input(arr, self.serializer_id)
        target = pa.large_string() if pa.types.is_large_binary(arr.type) else pa.string()
        try:
            return arr.cast(target)
        except pa.ArrowInvalid:
            i, e = _first_invalid_utf8(arr)
            raise CorruptSavepointError(
                f"string: record {i} is invalid UTF-8 ({e.reason}) at offset {e.start}"
            ) from None


@register_builtin
class Bytes(_Primitive):
    """Raw bytes, stored as they are (§3.6)."""

    serializer_id = "bytes"
    version = 1
    _arrow = pa.binary()

    def encode(self, value: Any) -> bytes:
        if isinstance(value, bytes):
            return value
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        raise self._invalid(value)

    def _decode_range(self, mv: memoryview, start: int, end: int) -> bytes:
        return bytes(mv[start:end])

    def encode_array(self, values: Any) -> pa.Array:
        arr = _arrow_input(self, values)
        if pa.types.is_null(arr.type) and len(arr) == 0:
            return pa.array([], type=pa.binary())
        if pa.types.is_large_binary(arr.type):
            _no_nulls(self, arr)
            return arr
        if not (pa.types.is_binary(arr.type) or pa.types.is_fixed_size_binary(arr.type)):
            raise InvalidArgumentError(f"bytes serializer cannot encode values of Arrow type {arr.type}")
        _no_nulls(self, arr)
        return arr.cast(pa.binary())

    def decode_array(self, arr: pa.Array) -> pa.Array:
        return binary_input(arr, self.serializer_id)


# --------------------------------------------------------------------------
# Format 1.2 (§3.13-§3.16): a savepoint using one lists the required feature
# "serializers-1.2" (spec/format.md §9.3), so older readers refuse it cleanly.
# --------------------------------------------------------------------------


@register_builtin
class Int8(_Integer):
    """8-bit signed integer, 1 byte two's complement (§3.13)."""

    serializer_id = "int8"
    version = 1
    _width = 1
    _dtype = np.dtype("i1")
    _struct = struct.Struct("<b")
    _arrow = pa.int8()
    _min, _max = -(2**7), 2**7 - 1


@register_builtin
class Int16(_Integer):
    """16-bit signed integer, 2 bytes little-endian two's complement (§3.14)."""

    serializer_id = "int16"
    version = 1
    _width = 2
    _dtype = np.dtype("<i2")
    _struct = struct.Struct("<h")
    _arrow = pa.int16()
    _min, _max = -(2**15), 2**15 - 1


@register_builtin
class Float32(Float64):
    """IEEE 754 binary32, 4 bytes little-endian; every bit pattern is kept (§3.15)."""

    serializer_id = "float32"
    version = 1
    _width = 4
    _dtype = np.dtype("<f4")  # type: ignore[assignment]  # Float64's, one width narrower
    _struct = struct.Struct("<f")
    _arrow = pa.float32()

    def encode(self, value: Any) -> bytes:
        try:
            return self._struct.pack(self._check_value(value))
        except OverflowError as e:  # finite doubles beyond the binary32 range
            raise self._invalid(value, str(e)) from e

    def _cast_input(self, values: Any, accept: Callable[[pa.DataType], bool]) -> pa.Array:
        arr = _arrow_input(self, values)
        if not (accept(arr.type) or (pa.types.is_null(arr.type) and len(arr) == 0)):
            raise InvalidArgumentError(f"{self.serializer_id} serializer cannot encode values of Arrow type {arr.type}")
        _no_nulls(self, arr)
        if pa.types.is_float32(arr.type):  # the exact bits, NaN payloads included
            return arr
        wide = arr.cast(pa.float64()).to_numpy(zero_copy_only=False)
        finite = wide[np.isfinite(wide)]
        if finite.size and float(np.abs(finite).max()) > float(np.finfo(np.float32).max):
            raise InvalidArgumentError(f"{self.serializer_id} serializer cannot encode values beyond the binary32 range")
        return pa.array(wide.astype(np.float32), pa.float32())  # round to nearest, as struct "<f" does


@register_builtin
class Char(_FixedNumber):
    """One UTF-16 code unit, 2 bytes little-endian; any value, lone surrogates included (§3.16).

    Python values are one-character strings (a code point of at most U+FFFF)."""

    serializer_id = "char"
    version = 1
    _width = 2
    _dtype = np.dtype("<u2")
    _struct = struct.Struct("<H")
    _arrow = pa.uint16()  # the code unit: Arrow strings cannot hold a lone surrogate

    def _check_value(self, value: Any) -> int:
        if isinstance(value, str) and len(value) == 1 and ord(value) <= 0xFFFF:
            return ord(value)
        raise self._invalid(value, "expected a one-character str of at most U+FFFF")

    def _decode_range(self, mv: memoryview, start: int, end: int) -> str:
        return chr(super()._decode_range(mv, start, end))

    def _to_arrow_value(self, value: Any) -> Any:
        return ord(value)

    def _from_arrow_value(self, item: Any) -> Any:
        return chr(item)

    def _accept(self, t: pa.DataType) -> bool:
        return pa.types.is_integer(t)

    def encode_array(self, values: Any) -> pa.Array:
        if not isinstance(values, (pa.Array, pa.ChunkedArray)):
            values = pa.array([self._check_value(v) for v in values], pa.uint16())
        return super().encode_array(values)
