"""Key hashing and key-group assignment, bit for bit identical to Apache Flink.

Keyed state is sharded into *key groups*: a key's group is
``murmur(java_hash(key)) % max_parallelism`` and each subtask owns a
contiguous range of groups. Reproducing Flink's arithmetic exactly is what
lets a savepoint written here be restored by Flink (and the reverse) without
moving a single key to the wrong subtask. The normative text is
``spec/key-groups.md``; the test vectors are in ``spec/vectors/``.

Two entry points compute the key group: :func:`assign_to_key_group` for one
key (the readable definition) and :func:`compute_key_groups` for a whole
Arrow column (vectorised with numpy, used on the write path). The two are
checked against each other by property tests.
"""

from __future__ import annotations

import math
import operator
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (makes pa.compute available)

from .errors import InvalidArgumentError

__all__ = [
    "UPPER_BOUND_MAX_PARALLELISM",
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "KeyType",
    "SCALAR_KEY_TYPES",
    "java_hash",
    "murmur_hash",
    "assign_to_key_group",
    "compute_key_groups",
    "key_groups_of_cells",
    "binary_parts",
    "murmur3_by_words",
    "KeyGroupRange",
    "key_group_range",
    "key_group_bounds",
    "operator_index_for_key_group",
    "default_max_parallelism",
    "check_parallelism",
    "check_key_type",
]

#: Largest max parallelism (number of key groups) Flink accepts: 2**15, so
#: that a key-group index fits a signed 16-bit prefix in Flink's state backends.
UPPER_BOUND_MAX_PARALLELISM = 32768

#: Smallest max parallelism chosen by :func:`default_max_parallelism`.
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 128

#: A key type: one of :data:`SCALAR_KEY_TYPES`, or a tuple of key types (a
#: tuple key, hashed like Flink's ``TupleN``; nesting is allowed).
KeyType = Union[str, Tuple["KeyType", ...]]

#: The scalar key types, named like their serializer ids (spec/serializers.md).
SCALAR_KEY_TYPES = frozenset({"int32", "int64", "string", "boolean", "bytes",
                              "int8", "int16", "float32", "char"})  # the last four: format 1.2

#: Java's canonical NaN (Float.floatToIntBits of every NaN).
_FLOAT32_NAN = 0x7FC00000
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_MASK32 = 0xFFFFFFFF

# Rows per vectorised batch and the key bytes a batch may hold before it is
# cut: both bound the temporary arrays (about 20 bytes per key byte).
_BATCH_ROWS = 65536
_BATCH_BYTES = 1 << 21


# --------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------


def check_key_type(key_type: Any) -> None:
    """Raise :class:`InvalidArgumentError` unless ``key_type`` is a valid
    :data:`KeyType` (a scalar type name or a non-empty tuple of key types)."""
    if isinstance(key_type, str):
        if key_type not in SCALAR_KEY_TYPES:
            raise InvalidArgumentError(
                f"unknown key type {key_type!r}; expected one of "
                f"{sorted(SCALAR_KEY_TYPES)} or a tuple of key types"
            )
        return
    if isinstance(key_type, tuple):
        if not key_type:
            raise InvalidArgumentError("a tuple key type needs at least one field")
        for field in key_type:
            check_key_type(field)
        return
    raise InvalidArgumentError(
        f"key type must be a string or a tuple of key types, got {key_type!r}"
    )


def _check_int(name: str, value: Any) -> int:
    # bool is an int subclass in Python; a parallelism of True is a bug.
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}") from None


def _check_max_parallelism(max_parallelism: Any) -> int:
    max_parallelism = _check_int("max_parallelism", max_parallelism)
    if not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise InvalidArgumentError(
            f"max_parallelism={max_parallelism} is out of range: it must be "
            f"between 1 and {UPPER_BOUND_MAX_PARALLELISM}"
        )
    return max_parallelism


def check_parallelism(parallelism: int, max_parallelism: int) -> None:
    """Raise :class:`InvalidArgumentError` unless
    ``1 <= parallelism <= max_parallelism <= 32768``."""
    parallelism = _check_int("parallelism", parallelism)
    max_parallelism = _check_int("max_parallelism", max_parallelism)
    if not 1 <= parallelism <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise InvalidArgumentError(
            f"invalid parallelism={parallelism} with max_parallelism={max_parallelism}: "
            f"need 1 <= parallelism <= max_parallelism <= {UPPER_BOUND_MAX_PARALLELISM}"
        )


# --------------------------------------------------------------------------
# Scalar definition
# --------------------------------------------------------------------------


def _to_int32(value: int) -> int:
    """Reinterpret the low 32 bits of ``value`` as a signed Java int."""
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def _polynomial_hash(units: Any, start: int) -> int:
    # Horner's rule with 32-bit wrapping; String.hashCode starts at 0 and
    # java.util.Arrays.hashCode starts at 1, everything else is the same.
    h = start
    for unit in units:
        h = (31 * h + unit) & _MASK32
    return h


def java_hash(key: Any, key_type: KeyType) -> int:
    """The Java ``hashCode()`` of ``key`` read as ``key_type``, as a signed
    32-bit int: what Flink feeds to :func:`murmur_hash`."""
    check_key_type(key_type)
    return _to_int32(_java_hash_u32(key, key_type))


def _java_hash_u32(key: Any, key_type: KeyType) -> int:
    """:func:`java_hash` as an unsigned 32-bit value (the same bits)."""
    if isinstance(key_type, tuple):
        if not isinstance(key, tuple) or len(key) != len(key_type):
            raise InvalidArgumentError(
                f"a key of type {key_type!r} must be a tuple of {len(key_type)} fields, got {key!r}"
            )
        # Flink TupleN.hashCode: result = h(f0); result = 31*result + h(fi).
        h = _java_hash_u32(key[0], key_type[0])
        for field, field_type in zip(key[1:], key_type[1:]):
            h = (31 * h + _java_hash_u32(field, field_type)) & _MASK32
        return h
    if key_type == "int32":
        value = _check_key_int(key, key_type, _INT32_MIN, _INT32_MAX)
        return value & _MASK32  # Integer.hashCode is the value itself
    if key_type in ("int8", "int16"):
        bits = 8 if key_type == "int8" else 16
        # Byte.hashCode / Short.hashCode: the value, sign-extended to an int.
        return _check_key_int(key, key_type, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1) & _MASK32
    if key_type == "float32":
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (float, int, np.floating, np.integer)):
            raise InvalidArgumentError(f"a key of type 'float32' must be a float, got {key!r}")
        # Float.hashCode is floatToIntBits: the binary32 bits, every NaN as 0x7fc00000.
        return _FLOAT32_NAN if math.isnan(key) else struct.unpack("<I", struct.pack("<f", key))[0]
    if key_type == "char":
        if not isinstance(key, str) or len(key) != 1 or ord(key) > 0xFFFF:
            raise InvalidArgumentError(f"a key of type 'char' must be one UTF-16 code unit (a str), got {key!r}")
        return ord(key)  # Character.hashCode: the code unit
    if key_type == "int64":
        value = _check_key_int(key, key_type, _INT64_MIN, _INT64_MAX)
        # Long.hashCode: (int)(value ^ (value >>> 32)); >>> is an unsigned shift.
        unsigned = value & 0xFFFFFFFFFFFFFFFF
        return (unsigned ^ (unsigned >> 32)) & _MASK32
    if key_type == "string":
        if not isinstance(key, str):
            raise InvalidArgumentError(f"a key of type 'string' must be a str, got {key!r}")
        # Java strings are UTF-16: a character outside the BMP is two code
        # units (a surrogate pair) and both enter the hash. surrogatepass
        # keeps lone surrogates as Java would instead of failing.
        data = key.encode("utf-16-le", "surrogatepass")
        return _polynomial_hash(np.frombuffer(data, dtype="<u2").tolist(), 0)
    if key_type == "boolean":
        if not isinstance(key, (bool, np.bool_)):
            raise InvalidArgumentError(f"a key of type 'boolean' must be a bool, got {key!r}")
        return 1231 if key else 1237  # Boolean.hashCode
    if key_type == "bytes":
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"a key of type 'bytes' must be bytes, got {key!r}")
        # java.util.Arrays.hashCode(byte[]): Java bytes are signed.
        signed = np.frombuffer(bytes(key), dtype=np.int8).tolist()
        return _polynomial_hash(signed, 1)
    raise AssertionError(key_type)  # unreachable: check_key_type ran first


def _check_key_int(key: Any, key_type: str, low: int, high: int) -> int:
    if isinstance(key, (bool, np.bool_)):
        raise InvalidArgumentError(f"a key of type {key_type!r} must be an integer, got {key!r}")
    try:
        value = operator.index(key)
    except TypeError:
        raise InvalidArgumentError(
            f"a key of type {key_type!r} must be an integer, got {key!r}"
        ) from None
    if not low <= value <= high:
        raise InvalidArgumentError(
            f"key {value} is out of range for key type {key_type!r} ({low}..{high})"
        )
    return value


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def murmur_hash(code: int) -> int:
    """Flink ``MathUtils.murmurHash(int)``: MurmurHash3 x86_32 of one 4-byte
    block with seed 0, folded to a non-negative int."""
    code = _check_int("code", code)
    if not _INT32_MIN <= code <= _INT32_MAX:
        raise InvalidArgumentError(f"code={code} is not a 32-bit signed integer")
    h = code & _MASK32
    h = (h * 0xCC9E2D51) & _MASK32
    h = _rotl32(h, 15)
    h = (h * 0x1B873593) & _MASK32
    h = _rotl32(h, 13)
    h = (h * 5 + 0xE6546B64) & _MASK32
    h ^= 4  # the length in bytes of the single block
    # fmix32 finaliser
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    signed = _to_int32(h)
    if signed >= 0:
        return signed
    # -Integer.MIN_VALUE overflows in Java, so Flink maps it to 0.
    return -signed if signed != _INT32_MIN else 0


def _infer_key_type(key: Any) -> KeyType:
    # bool before int: bool is an int subclass.
    if isinstance(key, (bool, np.bool_)):
        return "boolean"
    if isinstance(key, str):
        return "string"
    if isinstance(key, (bytes, bytearray, memoryview)):
        return "bytes"
    if isinstance(key, tuple):
        if not key:
            raise InvalidArgumentError("an empty tuple is not a valid key")
        return tuple(_infer_key_type(field) for field in key)
    if isinstance(key, int) or hasattr(key, "__index__"):
        # Java Integer and Long hash differently (e.g. -1 -> -1 vs 0), so
        # the width cannot be guessed from the value.
        raise InvalidArgumentError(
            f"integer key {key!r} needs an explicit key_type ('int32' or 'int64')"
        )
    raise InvalidArgumentError(f"cannot hash a key of Python type {type(key).__name__}")


def assign_to_key_group(key: Any, max_parallelism: int, key_type: KeyType | None = None) -> int:
    """Key group of ``key``: ``murmur_hash(java_hash(key)) % max_parallelism``
    (Flink ``KeyGroupRangeAssignment.assignToKeyGroup``).

    ``key_type`` may be omitted for str, bytes, bool and tuples of those;
    integer keys need it because int32 and int64 hash differently.
    """
    max_parallelism = _check_max_parallelism(max_parallelism)
    if key_type is None:
        key_type = _infer_key_type(key)
    return murmur_hash(java_hash(key, key_type)) % max_parallelism


# --------------------------------------------------------------------------
# Vectorised definition
# --------------------------------------------------------------------------

_U32 = np.uint32
_C1 = _U32(0xCC9E2D51)
_C2 = _U32(0x1B873593)
_C3 = _U32(0xE6546B64)
_F1 = _U32(0x85EBCA6B)
_F2 = _U32(0xC2B2AE35)
_FIVE = _U32(5)
_FOUR = _U32(4)
_THIRTY_ONE = _U32(31)

# 31**k mod 2**32, grown on demand (shared by all batches).
_pow31 = np.ones(1, dtype=np.uint32)


def _powers_of_31(n: int) -> np.ndarray:
    """The first ``n`` entries of the table 31**k mod 2**32 (k = 0..n-1)."""
    global _pow31
    if len(_pow31) < n:
        size = max(n, 2 * len(_pow31), 64)
        table = np.full(size, 31, dtype=np.uint32)
        table[0] = 1
        # cumprod in uint32 wraps modulo 2**32, which is exactly Java's int.
        _pow31 = np.cumprod(table, dtype=np.uint32)
    return _pow31[:n]


def _rotl_u32(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U32(r)) | (x >> _U32(32 - r))


# MurmurHash3 x86_32's steps over uint32 arrays; numpy integer arrays wrap silently on
# overflow, so uint32 math is Java int math.


def _scramble(block: np.ndarray) -> np.ndarray:
    """A 4-byte block scrambled (``k`` of MurmurHash3)."""
    k = block * _C1
    k = _rotl_u32(k, 15)
    k *= _C2
    return k


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    """A scrambled block mixed into the running hashes ``h``."""
    h = h ^ k
    h = _rotl_u32(h, 13)
    h *= _FIVE
    h += _C3
    return h


def _finish(h: np.ndarray, length: np.ndarray | np.uint32) -> np.ndarray:
    """The length in bytes mixed in, then the fmix32 finaliser."""
    h = h ^ length
    h ^= h >> _U32(16)
    h *= _F1
    h ^= h >> _U32(13)
    h *= _F2
    h ^= h >> _U32(16)
    return h


def _murmur_u32(code: np.ndarray) -> np.ndarray:
    """Vectorised :func:`murmur_hash` over uint32 hash codes (non-negative int32 result)."""
    h = _finish(_mix(np.zeros_like(code), _scramble(code)), _FOUR)
    # abs() of the signed value, wrapping as Java's does: abs(INT_MIN) is INT_MIN, whose
    # low 31 bits are 0 (Flink's fold to 0); every other abs() fits in 31 bits.
    folded = np.abs(h.view(np.int32))
    folded &= np.int32(_INT32_MAX)
    return folded


#: Below this many rows left to hash, a block costs less as Python int math than as numpy calls.
_FEW_ROWS = 16


def murmur3_by_words(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, seed: int) -> np.ndarray:
    """MurmurHash3 x86_32 (uint32) of every row ``data[starts[r]:starts[r] + lengths[r]]`` of
    a uint8 array, each a whole number of 4-byte blocks read little-endian, with ``seed``.

    Every block is scrambled at once; the running hashes, a chain per row, advance a block
    at a time for all rows that have one (rows longest first, so those are a prefix), and
    the last few long rows finish in Python ints: work in proportion to the bytes.
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if (lengths % 4).any():
        raise InvalidArgumentError("murmur3_by_words hashes whole 4-byte blocks only")
    order = np.argsort(-lengths, kind="stable")
    blocks = lengths[order] // 4
    firsts = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(blocks, out=firsts[1:])
    # Byte 0 of every block, rows in ``order``, then the blocks little-endian.
    at = np.repeat(starts[order] - 4 * firsts[:-1], blocks) + 4 * np.arange(firsts[-1])
    k = _scramble(data[at].astype(np.uint32) | data[at + 1].astype(np.uint32) << _U32(8)
                  | data[at + 2].astype(np.uint32) << _U32(16) | data[at + 3].astype(np.uint32) << _U32(24))
    h = np.full(len(order), seed & _MASK32, dtype=np.uint32)
    descending, j, rows = -blocks, 0, len(order)
    while rows >= _FEW_ROWS:
        rows = int(np.searchsorted(descending, -j, side="left"))  # the rows longer than j blocks
        h[:rows] = _mix(h[:rows], k[firsts[:rows] + j])
        j += 1
    for r in range(rows):  # the few rows longer than j blocks
        chain = int(h[r])
        for block in k[firsts[r] + j:firsts[r + 1]].tolist():
            chain = (_rotl32(chain ^ block, 13) * 5 + 0xE6546B64) & _MASK32  # _mix, as murmur_hash
        h[r] = chain
    out = np.empty_like(h)
    out[order] = _finish(h, lengths[order].astype(np.uint32))
    return out


def _segment_polynomial(
    units: np.ndarray, offsets: np.ndarray, start_value_one: bool
) -> np.ndarray:
    """Horner hash of each row of a ragged array, all rows at once.

    ``units`` holds the code units (any integer dtype; signed bytes wrap to
    uint32 as Java's sign extension does) and row ``r`` is ``units[offsets[r]:offsets[r+1]]`` with
    ``offsets[0] == 0``. Expanding Horner's rule, unit ``i`` of a row of
    length ``L`` contributes ``unit * 31**(L-1-i)``: this equals hashing a
    right-aligned, zero-padded matrix (leading zeros add nothing) without
    materialising the padding, so long rows need no width cap. All sums are
    modulo 2**32 (uint32 wrap), exactly Java's int arithmetic.
    """
    lengths = np.diff(offsets)
    n_units = int(offsets[-1])
    width = int(lengths[0]) if len(lengths) else 0
    if n_units and (lengths == width).all():
        # Equal lengths (fixed-size keys): each row times the powers 31**(L-1) .. 1, summed
        # in uint32 (wrapping, as Java's int does) by one einsum over the batch.
        matrix = units.reshape(-1, width).astype(np.uint32)
        h = np.einsum("ij,j->i", matrix, _powers_of_31(width)[::-1])
    elif n_units:
        units = units.astype(np.uint32)
        ends = np.repeat(offsets[1:], lengths)
        exponents = ends - 1 - np.arange(n_units, dtype=ends.dtype)
        contributions = units * _powers_of_31(int(lengths.max()))[exponents]
        sums = np.zeros(n_units + 1, dtype=np.uint32)
        np.cumsum(contributions, dtype=np.uint32, out=sums[1:])
        # Difference of prefix sums; wrapping subtraction is still exact mod 2**32.
        h = sums[offsets[1:]] - sums[offsets[:-1]]
    else:
        h = np.zeros(len(lengths), dtype=np.uint32)
    if start_value_one:
        # Arrays.hashCode starts at 1, which ends up multiplied by 31**L.
        h = h + _powers_of_31(int(lengths.max(initial=0)) + 1)[lengths]
    return h


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets rebased to 0 as int64, value bytes as uint8) of a (large)
    string/binary array, zero-copy where possible."""
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    offset_type = np.int64 if large else np.int32
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[arr.offset : arr.offset + len(arr) + 1]
    offsets = offsets.astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    if data_buf is None or last == first:
        data = np.zeros(0, dtype=np.uint8)
    else:
        data = np.frombuffer(data_buf, dtype=np.uint8)[first:last]
    return offsets - first, data


def _string_hash_u32(arr: pa.Array) -> np.ndarray:
    offsets, data = binary_parts(arr)
    # A row is ASCII iff none of its bytes has the high bit set; count those
    # bytes per row with a prefix sum (only if there are any: mostly there are none).
    # For ASCII, UTF-8 bytes == UTF-16 units.
    high_bytes = data >= 0x80
    if high_bytes.any():
        high = np.zeros(len(data) + 1, dtype=np.int64)
        np.cumsum(high_bytes, out=high[1:])
        non_ascii = np.flatnonzero(high[offsets[1:]] != high[offsets[:-1]])
    else:
        non_ascii = np.zeros(0, dtype=np.intp)
    h = _segment_polynomial(data, offsets, start_value_one=False)
    if len(non_ascii):
        # Only rows with non-ASCII text: re-encode them as UTF-16 code units
        # (a non-BMP character becomes a surrogate pair) and hash those.
        texts = arr.take(pa.array(non_ascii)).to_pylist()
        encoded = [t.encode("utf-16-le") for t in texts]
        unit_lengths = np.fromiter((len(e) // 2 for e in encoded), dtype=np.int64, count=len(encoded))
        sub_offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(unit_lengths, out=sub_offsets[1:])
        units = np.frombuffer(b"".join(encoded), dtype="<u2")
        h[non_ascii] = _segment_polynomial(units, sub_offsets, start_value_one=False)
    return h


def _bytes_hash_u32(arr: pa.Array) -> np.ndarray:
    offsets, data = binary_parts(arr)
    # Java bytes are signed: 0x80..0xff are -128..-1, which wrap to 2**32-128.. as uint32.
    return _segment_polynomial(data.view(np.int8), offsets, start_value_one=True)


def _hash_u32(arr: pa.Array, key_type: KeyType) -> np.ndarray:
    """Vectorised :func:`java_hash` (as uint32) of a non-chunked array."""
    if arr.null_count:
        raise InvalidArgumentError(f"keys of type {key_type!r} must not be null")
    t = arr.type
    if isinstance(key_type, tuple):
        if not pa.types.is_struct(t) or t.num_fields != len(key_type):
            raise InvalidArgumentError(
                f"keys of type {key_type!r} must be a struct array with {len(key_type)} fields, got {t}"
            )
        # StructArray.field() returns the child sliced to this array's window.
        fields = [arr.field(i) for i in range(len(key_type))]
        h = _hash_u32(fields[0], key_type[0])
        for field, field_type in zip(fields[1:], key_type[1:]):
            h = h * _THIRTY_ONE + _hash_u32(field, field_type)
        return h
    if key_type == "int32":
        if not pa.types.is_int32(t):
            raise InvalidArgumentError(f"keys of type 'int32' must be an int32 array, got {t}")
        return arr.to_numpy(zero_copy_only=False).view(np.uint32)
    if key_type in ("int8", "int16"):
        if t != (pa.int8() if key_type == "int8" else pa.int16()):
            raise InvalidArgumentError(f"keys of type {key_type!r} must be an {key_type} array, got {t}")
        return arr.to_numpy(zero_copy_only=False).astype(np.int32).view(np.uint32)  # sign-extended
    if key_type == "float32":
        if not pa.types.is_float32(t):
            raise InvalidArgumentError(f"keys of type 'float32' must be a float32 array, got {t}")
        values = arr.to_numpy(zero_copy_only=False)
        return np.where(np.isnan(values), _U32(_FLOAT32_NAN), values.view(np.uint32)).astype(np.uint32)
    if key_type == "char":
        if not pa.types.is_uint16(t):
            raise InvalidArgumentError(f"keys of type 'char' must be a uint16 array of code units, got {t}")
        return arr.to_numpy(zero_copy_only=False).astype(np.uint32)
    if key_type == "int64":
        if not pa.types.is_int64(t):
            raise InvalidArgumentError(f"keys of type 'int64' must be an int64 array, got {t}")
        v = arr.to_numpy(zero_copy_only=False).view(np.uint64)
        return (v ^ (v >> np.uint64(32))).astype(np.uint32)  # astype keeps the low 32 bits
    if key_type == "boolean":
        if not pa.types.is_boolean(t):
            raise InvalidArgumentError(f"keys of type 'boolean' must be a boolean array, got {t}")
        return np.where(arr.to_numpy(zero_copy_only=False), _U32(1231), _U32(1237)).astype(np.uint32)
    if key_type == "string":
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise InvalidArgumentError(f"keys of type 'string' must be a string array, got {t}")
        return _string_hash_u32(arr)
    if key_type == "bytes":
        if pa.types.is_fixed_size_binary(t):
            arr = arr.cast(pa.binary())
        elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
            raise InvalidArgumentError(f"keys of type 'bytes' must be a binary array, got {t}")
        return _bytes_hash_u32(arr)
    raise AssertionError(key_type)  # unreachable: check_key_type ran first


def _is_variable_width(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )


def _batches(arr: pa.Array) -> Iterator[pa.Array]:
    """Slices of ``arr`` of at most _BATCH_ROWS rows and (roughly) at most
    _BATCH_BYTES bytes of variable-length data, so temporaries stay bounded."""
    n = len(arr)
    rows = _BATCH_ROWS
    if n <= rows and arr.nbytes <= _BATCH_BYTES:  # a chunk's keys, say: one batch
        yield arr
        return
    if _is_variable_width(arr.type):
        offsets, _ = binary_parts(arr)
        start = 0
        while start < n:
            stop = min(start + rows, n)
            # Cut at the byte budget, but always take at least one row.
            limit = offsets[start] + _BATCH_BYTES
            cut = int(np.searchsorted(offsets, limit, side="right")) - 1
            stop = max(start + 1, min(stop, cut))
            yield arr.slice(start, stop - start)
            start = stop
        return
    for start in range(0, n, rows):
        yield arr.slice(start, min(rows, n - start))


def _chunks(keys: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    if isinstance(keys, pa.ChunkedArray):
        return list(keys.chunks)
    if isinstance(keys, pa.Array):
        return [keys]
    raise InvalidArgumentError(f"keys must be a pyarrow Array or ChunkedArray, got {type(keys).__name__}")


def _assign(chunks: list[pa.Array], max_parallelism: int, hash_u32: Callable[[pa.Array], np.ndarray],
            run_starts: Callable[[pa.Array], np.ndarray | None]) -> np.ndarray:
    """Key groups of the keys of ``chunks`` from their hash codes, a bounded batch at a time;
    where ``run_starts`` finds runs of equal keys, each run is hashed once."""
    out = np.empty(sum(len(c) for c in chunks), dtype=np.int32)
    pos = 0
    for chunk in chunks:
        # Batch on the top-level array; a struct's variable-length children are
        # sliced with it, so their size is bounded by the row count.
        for batch in _batches(chunk):
            starts = run_starts(batch)
            if starts is None:
                out[pos : pos + len(batch)] = _murmur_u32(hash_u32(batch)) % max_parallelism
            else:
                # Hash each run's first key once; equal keys are in one key group.
                groups = _murmur_u32(hash_u32(batch.take(pa.array(starts)))) % max_parallelism
                out[pos : pos + len(batch)] = np.repeat(groups, np.diff(starts, append=len(batch)))
            pos += len(batch)
    return out


def compute_key_groups(
    keys: pa.Array | pa.ChunkedArray, max_parallelism: int, key_type: KeyType
) -> np.ndarray:
    """Key group of every key of an Arrow column, as an int32 numpy array.

    Vectorised equivalent of :func:`assign_to_key_group`; where byte-hashed keys repeat
    in consecutive rows (a key under several namespaces), each run is hashed once. ``keys`` must have
    the Arrow type matching ``key_type``: int32, int64, string/large_string,
    boolean, binary/large_binary (or fixed_size_binary), and for a tuple key
    a struct whose fields are the tuple's fields in order. Nulls are refused.
    """
    max_parallelism = _check_max_parallelism(max_parallelism)
    check_key_type(key_type)
    return _assign(_chunks(keys), max_parallelism, lambda batch: _hash_u32(batch, key_type),
                   lambda batch: _run_starts(batch, key_type))


def key_groups_of_cells(keys: pa.Array | pa.ChunkedArray, max_parallelism: int,
                        hash_codes: Callable[[pa.Array], np.ndarray]) -> np.ndarray:
    """Key group of every binary cell of ``keys`` (no nulls) whose Java ``hashCode``
    ``hash_codes`` computes (uint32, for a batch of cells): an engine's key class hashed
    by its bytes (a Flink SQL key). Batched and run-deduplicated as :func:`compute_key_groups`."""
    max_parallelism = _check_max_parallelism(max_parallelism)
    chunks = _chunks(keys)
    for chunk in chunks:
        if not _is_variable_width(chunk.type) or chunk.null_count:
            raise InvalidArgumentError(f"keys hashed by their bytes are binary cells without nulls, got {chunk.type}")
    return _assign(chunks, max_parallelism, hash_codes, repeated_run_starts)


def _hashes_bytes(key_type: KeyType) -> bool:
    """Whether the key hash runs over the key's bytes (strings, byte arrays, tuples with them)."""
    if isinstance(key_type, tuple):
        return any(_hashes_bytes(field) for field in key_type)
    return key_type in ("string", "bytes")


def _same_as_previous(arr: pa.Array, key_type: KeyType) -> np.ndarray:
    """For rows 1..n-1: whether the key is the previous row's, bit for bit (a null is never
    the same, so it stays a row of its own and is refused by the hash)."""
    if isinstance(key_type, tuple):
        fields = np.ones(len(arr) - 1, dtype=bool)
        for i, field_type in enumerate(key_type):
            fields &= _same_as_previous(arr.field(i), field_type)
        return fields
    if key_type == "float32":  # by bits: 0.0 and -0.0 are equal floats with different hashes
        bits = arr.to_numpy(zero_copy_only=False).view(np.uint32)
        return (bits[1:] == bits[:-1]) & ~arr.is_null().to_numpy(zero_copy_only=False)[1:]
    if _is_variable_width(arr.type) and not arr.null_count:
        return binary_same_as_previous(arr)
    equal = pa.compute.equal(arr.slice(1), arr.slice(0, len(arr) - 1))
    same: np.ndarray = (pa.compute.fill_null(equal, False) if equal.null_count else equal).to_numpy(zero_copy_only=False)
    return same


def binary_same_as_previous(arr: pa.Array) -> np.ndarray:
    """For rows 1..n-1 of a string or binary array without nulls: whether the row's bytes
    are the previous row's. Cells of one width (fixed-size keys and their encodings) are
    compared as rows of a numpy matrix, several bytes per comparison."""
    if len(arr) < 2:
        return np.zeros(0, dtype=bool)
    offsets, data = binary_parts(arr)
    lengths = np.diff(offsets)
    width = int(lengths[0])
    if not (lengths == width).all():
        equal = pa.compute.equal(arr.slice(1), arr.slice(0, len(arr) - 1))
        same: np.ndarray = equal.to_numpy(zero_copy_only=False)
        return same
    if width == 0:
        return np.ones(len(lengths) - 1, dtype=bool)
    unit = next(u for u in (np.uint64, np.uint32, np.uint16, np.uint8) if width % np.dtype(u).itemsize == 0)
    rows = data.view(unit).reshape(len(lengths), -1)
    differs: np.ndarray = rows[1:, 0] != rows[:-1, 0]
    for column in range(1, rows.shape[1]):
        differs |= rows[1:, column] != rows[:-1, column]
    return ~differs


def run_starts(arr: pa.Array) -> np.ndarray:
    """The first row of each run of byte-equal consecutive cells of a string or binary
    array without nulls (row 0 starts the first run)."""
    if not len(arr):
        return np.zeros(0, dtype=np.intp)
    return _starts(binary_same_as_previous(arr))


def repeated_run_starts(arr: pa.Array) -> np.ndarray | None:
    """:func:`run_starts` of a string or binary array without nulls (a column of key
    encodings), when its cells repeat enough for working on runs to pay; else None."""
    return _paying_runs(arr, binary_same_as_previous)


#: Rows looked at first to decide whether keys come in runs: distinct keys (no namespaces)
#: are spared comparing every row with the next.
_RUN_SAMPLE_ROWS = 64


def _paying_runs(arr: pa.Array, same_as_previous: Callable[[pa.Array], np.ndarray]) -> np.ndarray | None:
    """The run starts of ``arr`` by ``same_as_previous``, or None when the runs average at
    most two rows (in the first rows, then in all), where hashing each row costs less."""
    def runs_pay(same: np.ndarray) -> bool:
        return 2 * (len(same) - np.count_nonzero(same) + 1) <= len(same) + 1

    if len(arr) < 2 or not runs_pay(same_as_previous(arr.slice(0, _RUN_SAMPLE_ROWS))):
        return None
    same = same_as_previous(arr)
    return _starts(same) if runs_pay(same) else None


def _starts(same: np.ndarray) -> np.ndarray:
    """Run starts from "same as the previous row" of rows 1..n-1."""
    return np.flatnonzero(np.concatenate([np.zeros(1, dtype=bool), same]) == 0)


def _run_starts(arr: pa.Array, key_type: KeyType) -> np.ndarray | None:
    """The first row of each run of equal consecutive keys, when hashing only those pays:
    byte-hashed keys that repeat (a key under many namespaces: spec/format.md §7.7, stored
    key then namespace as Flink does). None when keys mostly differ from their neighbour,
    or when ``arr`` is not of the key type (the hash then says what is wrong)."""
    if not _hashes_bytes(key_type):
        return None
    if isinstance(key_type, tuple) and not (pa.types.is_struct(arr.type) and arr.type.num_fields == len(key_type)):
        return None
    try:
        return _paying_runs(arr, lambda a: _same_as_previous(a, key_type))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError, ValueError):
        return None


# --------------------------------------------------------------------------
# Key-group ranges and operator indexes
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyGroupRange:
    """An inclusive range ``first..last`` of key groups.

    The empty range is ``KeyGroupRange(0, -1)`` (what an intersection of
    disjoint ranges returns, as Flink's ``EMPTY_KEY_GROUP_RANGE``).
    """

    first: int
    last: int

    def __post_init__(self) -> None:
        first = _check_int("first", self.first)
        last = _check_int("last", self.last)
        if first < 0 or last < first - 1:
            raise InvalidArgumentError(
                f"invalid key-group range first={first}, last={last}: need 0 <= first <= last + 1"
            )

    @classmethod
    def empty(cls) -> KeyGroupRange:
        """The canonical empty range."""
        return cls(0, -1)

    def __len__(self) -> int:
        return self.last - self.first + 1

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.first, self.last + 1))

    def __contains__(self, key_group: object) -> bool:
        if isinstance(key_group, bool) or not hasattr(key_group, "__index__"):
            return False
        return self.first <= operator.index(key_group) <= self.last

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        """The key groups in both ranges (possibly the empty range)."""
        first = max(self.first, other.first)
        last = min(self.last, other.last)
        return KeyGroupRange(first, last) if first <= last else KeyGroupRange.empty()


def key_group_range(max_parallelism: int, parallelism: int, operator_index: int) -> KeyGroupRange:
    """The key groups subtask ``operator_index`` owns at ``parallelism``
    (Flink ``computeKeyGroupRangeForOperatorIndex``)."""
    check_parallelism(parallelism, max_parallelism)
    operator_index = _check_int("operator_index", operator_index)
    if not 0 <= operator_index < parallelism:
        raise InvalidArgumentError(
            f"operator_index={operator_index} is out of range for parallelism={parallelism}"
        )
    first = (operator_index * max_parallelism + parallelism - 1) // parallelism
    last = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(first, last)


def key_group_bounds(max_parallelism: int, parallelism: int) -> tuple[np.ndarray, np.ndarray]:
    """First and last key group of every subtask ``0..parallelism-1`` at once (int64
    arrays): :func:`key_group_range` for all of them in O(parallelism) numpy work."""
    check_parallelism(parallelism, max_parallelism)
    index = np.arange(parallelism, dtype=np.int64)
    return ((index * max_parallelism + parallelism - 1) // parallelism,
            ((index + 1) * max_parallelism - 1) // parallelism)


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """The subtask that owns ``key_group`` at ``parallelism``
    (Flink ``computeOperatorIndexForKeyGroup``)."""
    check_parallelism(parallelism, max_parallelism)
    key_group = _check_int("key_group", key_group)
    if not 0 <= key_group < max_parallelism:
        raise InvalidArgumentError(
            f"key_group={key_group} is out of range for max_parallelism={max_parallelism}"
        )
    return key_group * parallelism // max_parallelism


def _round_up_to_power_of_two(x: int) -> int:
    # Flink MathUtils.roundUpToPowerOfTwo for 1 <= x <= 2**30.
    return 1 << (x - 1).bit_length()


def default_max_parallelism(parallelism: int) -> int:
    """Flink's default max parallelism for an operator of ``parallelism``:
    ``min(max(roundUpToPowerOfTwo(p + p // 2), 128), 32768)``."""
    parallelism = _check_int("parallelism", parallelism)
    if not 1 <= parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise InvalidArgumentError(
            f"parallelism={parallelism} is out of range: it must be between 1 "
            f"and {UPPER_BOUND_MAX_PARALLELISM}"
        )
    return min(
        max(_round_up_to_power_of_two(parallelism + parallelism // 2), DEFAULT_LOWER_BOUND_MAX_PARALLELISM),
        UPPER_BOUND_MAX_PARALLELISM,
    )
