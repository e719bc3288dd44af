"""pyref's encodings of values as the bytes Flink's serializers write, a column at a time.

:func:`transcoder` pairs a pyref serializer with the
:class:`~pyref.flink.serializers.FlinkType` of the Flink serializer the state goes
to (:mod:`pyref.flink.to_flink`), checks that they describe the same values, and
returns a function from a column of pyref encodings to a column of Flink's:

* fixed-width values (numbers, booleans, chars, enums, windows and tuples of them)
  are one byte permutation of the whole column (little- to big-endian);
* strings become ``StringValue`` (a length varint, then a varint per UTF-16 unit):
  ASCII rows as whole buffers, others one row at a time; byte strings get Flink's
  big-endian length in front;
* ``opaque`` values are already Flink's bytes and pass unchanged, also inside a
  tuple, list or map;
* anything else is decoded with the pyref serializer and encoded with an encoder
  built from the Flink type (lists, maps, tuples, POJOs, rows, nullable wrappers),
  one value at a time.

A pyref ``nullable`` matches a Flink type that writes its own null marker (a POJO's
or row's field, a map value, an object array's or set's element, a ``String``, a
``NullableSerializer``); a null met where Flink has none is refused with
:class:`~pyref.errors.UnsupportedFormatError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptSavepointError, UnsupportedFormatError
from ..serializers import Enum, ListOf, MapOf, Nullable, Opaque, Serializer, Tuple
from ..serializers.base import binary_input, binary_parts, fixed_width_binary, fixed_width_values
from .cep import CEP_KINDS
from .columns import gather_spans
from .dataoutput import string_value
from .rows import be_bytes, from_bytes, join_rows, lengths, varints
from .scala import SCALA_KINDS
from .serializers import FlinkType
from .to_flink import snapshot_label

__all__ = ["transcoder", "Transcoder", "split_nullable", "ROW_KINDS"]

Transcoder = Callable[[pa.Array], pa.Array]
#: Flink's RowKind byte values are the positions of these names.
ROW_KINDS = ("INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE")
#: Fixed-width kinds and the widths of their big-endian fields.
_FIELD_WIDTHS = {"boolean": (1,), "int8": (1,), "int16": (2,), "int32": (4,), "int64": (8,), "float32": (4,),
                 "float64": (8,), "char": (2,), "enum": (4,), "time-window": (8, 8), "global-window": (1,)}
#: Flink kinds whose values only the engine reads: pyref keeps them opaque.
_ENGINE_ONLY = frozenset({"opaque", "kryo", "avro", "value-type", "java", "either", "bigint", "bigdec", "date",
                          "sql-date", "sql-time", "sql-timestamp", "instant", "local-date", "local-time",
                          "local-date-time", "void", "row-data", "string-data", "raw-value", "timestamp-data",
                          "decimal-data", "external", "count-window", "array-data", "map-data", "sorted-map",
                          "linked-list"}) | CEP_KINDS | SCALA_KINDS
_STRUCTS = {"boolean": "?", "int8": "b", "int16": "h", "int32": "i", "int64": "q", "float32": "f", "float64": "d"}


def _name(source: Serializer) -> str:
    return snapshot_label(source.snapshot())


class _Mismatch(Exception):
    pass


def _strip(source: Serializer) -> Serializer:
    return source.inner if isinstance(source, Nullable) else source


# -- checking that a pyref serializer and a Flink type describe the same values ----------


def _check(source: Serializer, target: FlinkType) -> None:
    """Raise :class:`_Mismatch` unless values of ``source`` can be written as ``target``."""
    if isinstance(source, Opaque):
        return  # already the engine's bytes, whatever Flink type they are
    if target.kind == "nullable":
        return _check(_strip(source), target.children[0])
    source = _strip(source)
    kind, sid = target.kind, source.serializer_id
    if kind in _ENGINE_ONLY:
        raise _Mismatch(f"Flink's {target.describe()} values are only kept as opaque bytes")
    if kind in _FIELD_WIDTHS or kind in ("string", "bytes"):
        if sid != kind:
            raise _Mismatch(f"{_name(source)} is not Flink's {kind}")
        if isinstance(source, Enum) and tuple(source.symbols) != target.symbols:
            raise _Mismatch(f"enum symbols {list(source.symbols)} are not the Flink enum's {list(target.symbols)}")
        return
    if kind.startswith("array:") or kind in ("list", "set", "object-array"):
        if not isinstance(source, ListOf):
            raise _Mismatch(f"{_name(source)} is not a list")
        element = (FlinkType(kind[len("array:"):], "", 0, b"") if kind.startswith("array:") else target.children[0])
        return _check(source.element, element)
    if kind == "map":
        if not isinstance(source, MapOf):
            raise _Mismatch(f"{_name(source)} is not a map")
        _check(source.key, target.children[0])
        return _check(source.value, target.children[1])
    if kind in ("tuple", "pojo", "row"):
        if not isinstance(source, Tuple):
            raise _Mismatch(f"{_name(source)} is not a tuple")
        fields = list(source.fields)
        if kind == "row" and len(fields) == len(target.children) + 1:
            kinds = fields.pop(0)
            if not isinstance(kinds, Enum) or tuple(kinds.symbols) != ROW_KINDS:
                raise _Mismatch(f"a row's first field is its kind, enum{list(ROW_KINDS)}")
        if len(fields) != len(target.children):
            raise _Mismatch(f"{len(fields)} fields for Flink's {len(target.children)}")
        for field, child in zip(fields, target.children):
            _check(field, child)
        return
    raise _Mismatch(f"Flink's {target.describe()} cannot be written from pyref values")


# -- encoders of decoded values ---------------------------------------------------------

Encoder = Callable[[Any, bytearray], None]


def _no_null(target: FlinkType) -> UnsupportedFormatError:
    return UnsupportedFormatError(f"a null value where Flink's {target.describe()} serializer writes none")


def _fixed_encoder(target: FlinkType) -> Encoder:
    kind = target.kind
    if kind in _STRUCTS:
        packer = struct.Struct(">" + _STRUCTS[kind]).pack

        def fixed(value: Any, out: bytearray) -> None:
            if value is None:
                raise _no_null(target)
            out += packer(value)

        return fixed
    if kind == "char":
        return lambda value, out: out.extend(struct.pack(">H", ord(value)))
    if kind == "enum":
        ordinals = {s: i for i, s in enumerate(target.symbols)}
        return lambda value, out: out.extend(struct.pack(">i", ordinals[value]))
    if kind == "time-window":
        return lambda value, out: out.extend(struct.pack(">qq", value.start, value.end))
    return lambda value, out: out.append(0)  # global-window


def _sequence_encoder(fields: list[Encoder], null_flags: bool) -> Encoder:
    def encode(value: Any, out: bytearray) -> None:
        for field, v in zip(fields, value):
            if null_flags:
                out.append(1 if v is None else 0)
                if v is None:
                    continue
            field(v, out)

    return encode


def _encoder(source: Serializer, target: FlinkType) -> Encoder:
    """Writes one decoded pyref value as ``target``'s Flink serializer does (after :func:`_check`)."""
    if isinstance(source, Opaque):
        return lambda value, out: out.extend(value)
    kind = target.kind
    if kind == "nullable":
        inner = _encoder(_strip(source), target.children[0])
        padding = bytes(target.padding)

        def nullable(value: Any, out: bytearray) -> None:
            out.append(1 if value is None else 0)
            out += padding if value is None else b""
            if value is not None:
                inner(value, out)

        return nullable
    source = _strip(source)
    if kind in _FIELD_WIDTHS:
        return _fixed_encoder(target)
    if kind == "string":
        return lambda value, out: out.extend(string_value(value))
    if kind == "bytes":
        return lambda value, out: out.extend(struct.pack(">i", len(value)) + value)
    if kind.startswith("array:") or kind in ("list", "set", "object-array"):
        assert isinstance(source, ListOf)  # _check matched it
        element_type = FlinkType(kind[len("array:"):], "", 0, b"") if kind.startswith("array:") else target.children[0]
        element = _encoder(source.element, element_type)
        flag = {"set": lambda v: v is None, "object-array": lambda v: v is not None}.get(kind)

        def sequence(value: Any, out: bytearray) -> None:
            out += struct.pack(">i", len(value))
            for v in value:
                if flag is not None:
                    out.append(1 if flag(v) else 0)
                    if v is None:
                        continue
                element(v, out)

        return sequence
    if kind == "map":
        assert isinstance(source, MapOf)  # _check matched it
        key, value_encoder = _encoder(source.key, target.children[0]), _encoder(source.value, target.children[1])

        def mapping(value: Any, out: bytearray) -> None:
            out += struct.pack(">i", len(value))
            for k, v in value.items():
                key(k, out)
                out.append(1 if v is None else 0)
                if v is not None:
                    value_encoder(v, out)

        return mapping
    assert isinstance(source, Tuple)  # a tuple, POJO or row: _check matched it
    fields = list(source.fields)
    if kind == "tuple":
        return _sequence_encoder([_encoder(f, c) for f, c in zip(fields, target.children)], null_flags=False)
    if kind == "pojo":
        body = _sequence_encoder([_encoder(f, c) for f, c in zip(fields, target.children)], null_flags=True)

        def pojo(value: Any, out: bytearray) -> None:
            out.append(1 if value is None else 2)  # PojoSerializer's IS_NULL / NO_SUBCLASS flags
            if value is not None:
                body(value, out)

        return pojo
    return _row_encoder(fields, target)


def _row_encoder(fields: list[Serializer], target: FlinkType) -> Encoder:
    """``RowSerializer``: a null mask (the row kind's two bits first, when the snapshot
    has them), then the non-null fields."""
    with_kind = len(fields) == len(target.children) + 1
    if with_kind:
        fields = fields[1:]
    encoders = [_encoder(f, c) for f, c in zip(fields, target.children)]
    offset = 2 if target.row_kind else 0
    nbits = offset + len(encoders)
    mask_bytes = (nbits + 7) // 8

    def row(value: Any, out: bytearray) -> None:
        values = list(value)
        kind = ROW_KINDS.index(values.pop(0)) if with_kind else 0
        if kind and not target.row_kind:
            raise UnsupportedFormatError(f"a {ROW_KINDS[kind]} row, but Flink's row serializer keeps no row kind")
        mask = 0
        bits = [kind & 1, kind >> 1] if offset else []
        bits += [v is None for v in values]
        for bit in bits:
            mask = (mask << 1) | int(bit)
        out += (mask << (mask_bytes * 8 - nbits)).to_bytes(mask_bytes, "big")
        for encoder, v in zip(encoders, values):
            if v is not None:
                encoder(v, out)

    return row


# -- whole columns ----------------------------------------------------------------------


def _byte_order(source: Serializer, target: FlinkType) -> list[int] | None:
    """For values whose pyref and Flink encodings are the same fixed-width fields, only
    little- instead of big-endian: the byte permutation from one to the other."""
    if isinstance(source, Tuple) and target.kind == "tuple":
        order: list[int] = []
        for field, child in zip(source.fields, target.children):
            part = _byte_order(field, child)
            if part is None:
                return None
            order += [len(order) + i for i in part]
        return order
    if target.kind not in _FIELD_WIDTHS or source.serializer_id != target.kind:
        return None
    order, at = [], 0
    for width in _FIELD_WIDTHS[target.kind]:
        order += [at + width - 1 - i for i in range(width)]
        at += width
    return order


def _check_fixed(source: Serializer, column: np.ndarray) -> None:
    """The byte values a fixed-width pyref encoding forbids (spec/serializers.md §3)."""
    if source.serializer_id in ("boolean", "global-window") and column.size:
        limit = 1 if source.serializer_id == "boolean" else 0
        if int(column.max()) > limit:
            raise CorruptSavepointError(f"a {source.serializer_id} value byte above {limit}")
    if isinstance(source, Enum) and column.size:
        ordinals = np.ascontiguousarray(column).view("<i4")
        if ordinals.min() < 0 or ordinals.max() >= len(source.symbols):
            raise CorruptSavepointError(f"an enum ordinal outside its {len(source.symbols)} symbols")


def _leaves(source: Serializer) -> list[Serializer]:
    """The fields of a value in byte order, nested tuples flattened (each is checked by
    :func:`_check_fixed` at its own bytes)."""
    if isinstance(source, Tuple):
        return [leaf for field in source.fields for leaf in _leaves(field)]
    return [source]


def _permuted(source: Serializer, order: list[int]) -> Transcoder:
    width = len(order)
    index = np.array(order, np.intp)
    fixed_fields = _leaves(source)

    def permute(column: pa.Array) -> pa.Array:
        rows = len(column)
        values = fixed_width_values(binary_input(column, source.serializer_id), width, source.serializer_id)
        matrix = values.reshape(rows, width)
        at = 0
        for field in fixed_fields:
            field_width = field.fixed_width
            assert field_width is not None  # _byte_order orders fixed-width fields only
            _check_fixed(field, matrix[:, at:at + field_width])
            at += field_width
        return fixed_width_binary(np.ascontiguousarray(matrix[:, index]).reshape(-1), rows, width)

    return permute


def split_nullable(column: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """pyref ``nullable`` cells (0x00, or 0x01 and the value): which are null, and the
    inner encodings (empty for nulls)."""
    column = binary_input(column, "nullable")
    offsets, data = binary_parts(column)
    sizes = np.diff(offsets)
    if len(column) and sizes.min() < 1:
        raise CorruptSavepointError("nullable: a value without its null flag")
    flags = data[offsets[:-1]] if len(column) else np.zeros(0, np.uint8)
    nulls = flags == 0
    if np.any(flags > 1) or np.any(sizes[nulls] != 1):
        raise CorruptSavepointError("nullable: a null flag other than 0x00 / 0x01, or bytes after a null")
    # Every row without its flag (Arrow's binary_slice fails on a column of empty results).
    return nulls, gather_spans(data, offsets[:-1].astype(np.int64) + 1, sizes.astype(np.int64) - 1)


def _strings(nullable: bool) -> Transcoder:
    """UTF-8 (``nullable<string>``: behind a null flag) to ``StringValue``."""

    def transcode(column: pa.Array) -> pa.Array:
        if nullable:
            nulls, text = split_nullable(column)
        else:
            text = binary_input(column, "string")
            nulls = np.zeros(len(text), bool)
        try:
            ascii_rows = pc.string_is_ascii(text.cast(pa.string() if text.type == pa.binary() else pa.large_string()))
        except pa.ArrowInvalid as exc:
            raise CorruptSavepointError(f"string: not UTF-8 ({exc})") from None
        wide = ~ascii_rows.to_numpy(zero_copy_only=False)
        # ASCII rows: the length + 1 as a varint, then the bytes as they are; a null: one 0 byte.
        prefix = varints(np.where(nulls, 0, lengths(text) + 1), present=~wide)
        out = join_rows([prefix, text], len(text))
        if wide.any():
            encoded = [string_value(t) for t in text.filter(pa.array(wide)).cast(pa.string()).to_pylist()]
            out = pc.replace_with_mask(out, pa.array(wide), pa.array(encoded, out.type))
        return out

    return transcode


def _byte_strings(column: pa.Array) -> pa.Array:
    column = binary_input(column, "bytes")
    return join_rows([be_bytes(lengths(column), 4), column], len(column))


def _one_by_one(source: Serializer, target: FlinkType) -> Transcoder:
    encode = _encoder(source, target)

    def transcode(column: pa.Array) -> pa.Array:
        offsets, data = binary_parts(binary_input(column, source.serializer_id))
        view = data.data
        out, ends = bytearray(), np.zeros(len(column) + 1, np.int64)
        for i, (start, end) in enumerate(zip(offsets[:-1].tolist(), offsets[1:].tolist())):
            encode(source._decode_range(view, start, end), out)
            ends[i + 1] = len(out)
        return from_bytes(np.frombuffer(bytes(out), np.uint8), ends)

    return transcode


def transcoder(source: Serializer, target: FlinkType, where: str) -> Transcoder:
    """The function from a column of ``source``'s encodings to one of ``target``'s
    (``where`` names the state and part for errors)."""
    try:
        _check(source, target)
    except _Mismatch as exc:
        raise UnsupportedFormatError(f"serializer {_name(source)} does not match the Flink serializer it is "
                                     f"written with ({target.describe()}): {exc}", state=where) from None
    if isinstance(source, Opaque):
        return lambda column: binary_input(column, "opaque")
    order = _byte_order(source, target)
    if order is not None:
        transcode = _permuted(source, order)
    elif target.kind == "string":
        transcode = _strings(isinstance(source, Nullable))
    elif target.kind == "bytes" and not isinstance(source, Nullable):
        transcode = _byte_strings
    else:
        transcode = _one_by_one(source, target)

    def with_state(column: pa.Array) -> pa.Array:
        try:
            return transcode(column)
        except (CorruptSavepointError, UnsupportedFormatError) as exc:
            raise type(exc)(exc.reason, path=exc.path, state=where, byte_range=exc.byte_range) from None

    return with_state
