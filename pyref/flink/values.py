"""Decoding Flink-serialized values into Python values.

Each :class:`~pyref.flink.serializers.FlinkType` gets a :class:`Codec` that
reads one value from a :class:`~pyref.flink.datainput.DataInput` and skips
one (which is how composite keys and delimited lists are split). Whole
columns (Arrow binary arrays of cells) decode through :func:`decode_column`,
which takes numpy fast paths where the type allows: fixed-width numbers as one
big-endian view, ASCII strings without a Python loop per character.

Python forms: integers, floats, ``bool``, ``str`` (``None`` for null),
``bytes`` (``byte[]`` and any opaque type: Kryo, Avro, a user's serializer;
a Flink SQL ``RowData``, ``StringData`` or ``RawValueData`` as Flink serialized it, length first;
a ``TimestampData`` in epoch nanoseconds, a ``DecimalData`` as ``decimal.Decimal``, a value of an
``ExternalSerializer`` as its internal serializer's value, a ``CountWindow`` its id),
``tuple`` for a Tuple, :class:`Row` for a Row, ``dict`` for a POJO (field name -> value), lists
for List/Set/arrays, ``dict`` for Map, the constant name for an enum,
:class:`TimeWindow`, :data:`GLOBAL_WINDOW`, ``None`` for the void namespace,
:class:`TtlValue` for a TTL cell and :class:`Timer` for a timer, the named tuples of
:mod:`pyref.flink.cep` for Flink CEP's NFA state and shared buffer, the Scala API's values as
:mod:`pyref.flink.scala` says (a case class a tuple, an Option its value or ``None``...). Dates:
``date``/``sql-date``/``sql-time`` are epoch milliseconds, ``sql-timestamp``,
``instant`` and ``local-date-time`` epoch nanoseconds, ``local-date`` a
``datetime.date``, ``local-time`` nanoseconds of the day.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any, Callable, NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .cep import CEP_KINDS, cep_reader
from .columns import column_buffers
from .datainput import DataInput, decode_utf16_units
from .scala import SCALA_KINDS, scala_reader
from .serializers import DECIMAL_COMPACT_PRECISION, LENGTH_PREFIXED_KINDS, TIMESTAMP_COMPACT_PRECISION, FlinkType

__all__ = [
    "Codec",
    "Undelimited",
    "unflip_timestamp",
    "GLOBAL_WINDOW",
    "GlobalWindow",
    "Row",
    "TimeWindow",
    "Timer",
    "TtlValue",
    "codec_for",
    "decode_cell",
    "decode_column",
]


class TimeWindow(NamedTuple):
    """A window ``[start, end)`` in milliseconds (Flink's ``TimeWindow``)."""

    start: int
    end: int


class GlobalWindow:
    """Flink's single ``GlobalWindow``."""

    _instance: GlobalWindow | None = None

    def __new__(cls) -> GlobalWindow:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "GLOBAL_WINDOW"


GLOBAL_WINDOW = GlobalWindow()


class TtlValue(NamedTuple):
    """A value under state TTL: the time of its last access (ms) and the value."""

    timestamp: int
    value: Any


class Row(NamedTuple):
    """A ``org.apache.flink.types.Row``: its kind (``+I``, ``-U``, ``+U``, ``-D``)
    and its fields by position."""

    kind: str
    fields: tuple


ROW_KINDS = ("+I", "-U", "+U", "-D")


class Timer(NamedTuple):
    """A timer of an internal timer service."""

    timestamp: int
    key: Any
    namespace: Any


def unflip_timestamp(stored: int) -> int:
    """Timers store ``timestamp`` with its sign bit flipped (so bytes sort by time)."""
    return stored - 2**63 if stored >= 0 else stored + 2**63


class Undelimited(Exception):
    """A value of an opaque type cannot be skipped: its length is not stored."""


class Codec:
    """Reads (``read``) or steps over (``skip``) one value; ``width`` is the
    exact encoded size when every value has the same size."""

    __slots__ = ("type", "read", "skip", "width")

    def __init__(self, type_: FlinkType, read: Callable[[DataInput], Any],
                 skip: Callable[[DataInput], Any] | None = None, width: int | None = None) -> None:
        self.type = type_
        self.read = read
        self.width = width
        if skip is None:
            skip = (lambda inp: inp.skip(width, type_.kind)) if width is not None else read
        self.skip = skip


def _fixed(type_: FlinkType, fmt: str, convert: Callable[..., Any] | None = None) -> Codec:
    s = struct.Struct(">" + fmt)

    def read(inp: DataInput) -> Any:
        pos = inp.need(s.size, type_.kind)
        inp.pos = pos + s.size
        value = s.unpack_from(inp.data, pos)
        if convert is None:
            return value[0]
        try:
            return convert(*value)
        except (ValueError, ArithmeticError) as exc:  # e.g. month 13 in a LocalDate
            raise inp.corrupt(f"invalid {type_.kind} value {value} ({exc})", pos, s.size) from None

    return Codec(type_, read, width=s.size)


def _opaque(type_: FlinkType) -> Codec:
    def read(inp: DataInput) -> Any:
        raise Undelimited(type_.describe())

    return Codec(type_, read)


def _length_prefixed(type_: FlinkType) -> Codec:
    def read(inp: DataInput) -> bytes:
        start = inp.pos
        inp.skip(inp.read_count(f"{type_.kind} length", 1), type_.kind)
        return bytes(inp.data[start:inp.pos])

    return Codec(type_, read)


def _read_bigint(inp: DataInput) -> int | None:
    n = inp.read_int("BigInteger length")
    if n < 4:
        return (None, 0, 1, 10)[n] if n >= 0 else _bad(inp, f"BigInteger length {n}")
    return int.from_bytes(inp.read_bytes(n - 4, "BigInteger"), "big", signed=True)


def _bad(inp: DataInput, reason: str):
    raise inp.corrupt(reason)


def _read_bigdec(inp: DataInput) -> decimal.Decimal | None:
    unscaled = _read_bigint(inp)
    if unscaled is None:
        return None
    return _unscaled(unscaled, inp.read_int("BigDecimal scale"))


def _null_min(value: int, null: int = -(2**63)) -> int | None:
    return None if value == null else value


def _epoch_ns(seconds: int, nanos: int, *, null_nanos: int) -> int | None:
    if seconds == -(2**63) and nanos == null_nanos:
        return None
    return seconds * 1_000_000_000 + nanos


def _local_date(year: int, month: int, day: int) -> datetime.date | None:
    if year == -(2**31):
        return None
    return datetime.date(year, month, day)


def _local_time(hour: int, minute: int, second: int, nano: int) -> int | None:
    if hour == -128:
        return None
    return ((hour * 60 + minute) * 60 + second) * 1_000_000_000 + nano


def _read_local_date_time(inp: DataInput) -> int | None:
    start = inp.pos
    year, month, day = struct.unpack(">ibb", inp.read_bytes(6, "LocalDate"))
    hour, minute, second, nano = struct.unpack(">bbbi", inp.read_bytes(7, "LocalTime"))
    try:
        date = _local_date(year, month, day)
    except ValueError as exc:
        raise inp.corrupt(f"invalid LocalDateTime date ({exc})", start, 13) from None
    if date is None:
        return None
    days = (date - datetime.date(1970, 1, 1)).days
    return days * 86_400_000_000_000 + (_local_time(hour, minute, second, nano) or 0)


def _unscaled(unscaled: int, scale: int) -> decimal.Decimal:
    # Exact whatever the scale: a Decimal built from (sign, digits, exponent), no context rounding.
    sign, digits = (1 if unscaled < 0 else 0), tuple(int(d) for d in str(abs(unscaled)))
    return decimal.Decimal((sign, digits, -scale))


def _timestamp_data(type_: FlinkType) -> Codec:
    if type_.precision <= TIMESTAMP_COMPACT_PRECISION:
        return _fixed(type_, "q", lambda ms: ms * 1_000_000)
    return _fixed(type_, "qi", lambda ms, nanos: ms * 1_000_000 + nanos)


def _decimal_data(type_: FlinkType) -> Codec:
    scale = type_.scale
    if type_.precision <= DECIMAL_COMPACT_PRECISION:
        return _fixed(type_, "q", lambda unscaled: _unscaled(unscaled, scale))

    def read(inp: DataInput) -> decimal.Decimal:
        n = inp.read_count("DecimalData length", 1)
        return _unscaled(int.from_bytes(inp.read_bytes(n, "DecimalData"), "big", signed=True), scale)

    return Codec(type_, read)


def _read_char(inp: DataInput) -> str:
    return decode_utf16_units([inp.read_ushort("char")])


def _sized(type_: FlinkType, element: Codec, what: str) -> Codec:
    """``int length`` then elements (primitive and String arrays, List)."""

    def read(inp: DataInput) -> list:
        n = inp.read_count(f"{what} length", element.width or 1)
        return [element.read(inp) for _ in range(n)]

    def skip(inp: DataInput) -> None:
        n = inp.read_count(f"{what} length", element.width or 1)
        if element.width is not None:
            inp.skip(n * element.width, what)
        else:
            for _ in range(n):
                element.skip(inp)

    return Codec(type_, read, skip)


def _masked(type_: FlinkType, element: Codec) -> Codec:
    """The table runtime's LinkedList: ``int length``, then (with its null mask) one bit per
    element, most significant first, set for null, then the elements that are not null."""

    def read(inp: DataInput) -> list:
        n = inp.read_count("linked list length", 0 if type_.null_mask else 1)  # a null takes only its bit
        if not type_.null_mask:
            return [element.read(inp) for _ in range(n)]
        mask = inp.read_bytes((n + 7) // 8, "linked list null mask")
        return [None if mask[i // 8] & (0x80 >> (i % 8)) else element.read(inp) for i in range(n)]

    return Codec(type_, read)


def _flagged(type_: FlinkType, element: Codec, what: str, present_is_true: bool) -> Codec:
    """``int length`` then per element a null flag and the element (Set, object arrays)."""

    def read(inp: DataInput) -> list:
        n = inp.read_count(f"{what} length")
        out = []
        for _ in range(n):
            present = inp.read_bool(f"{what} null flag") == present_is_true
            out.append(element.read(inp) if present else None)
        return out

    def skip(inp: DataInput) -> None:
        n = inp.read_count(f"{what} length")
        for _ in range(n):
            if inp.read_bool(f"{what} null flag") == present_is_true:
                element.skip(inp)

    return Codec(type_, read, skip)


def _map(type_: FlinkType, key: Codec, value: Codec) -> Codec:
    def read(inp: DataInput) -> dict | list:
        n = inp.read_count("map size")
        pairs = []
        for _ in range(n):
            k = key.read(inp)
            pairs.append((k, None if inp.read_bool("map value null flag") else value.read(inp)))
        try:
            return dict(pairs)
        except TypeError:  # unhashable keys (lists, dicts): keep the pairs
            return pairs

    def skip(inp: DataInput) -> None:
        for _ in range(inp.read_count("map size")):
            key.skip(inp)
            if not inp.read_bool("map value null flag"):
                value.skip(inp)

    return Codec(type_, read, skip)


def _sequence(type_: FlinkType, fields: list[Codec], build: Callable[[list], Any]) -> Codec:
    widths = [f.width for f in fields]
    width = sum(w for w in widths if w is not None) if None not in widths else None

    def read(inp: DataInput) -> Any:
        return build([f.read(inp) for f in fields])

    def skip(inp: DataInput) -> None:
        for f in fields:
            f.skip(inp)

    return Codec(type_, read, skip if width is None else None, width)


_POJO_NULL, _POJO_EXACT = 1, 2


def _pojo(type_: FlinkType, fields: list[Codec]) -> Codec:
    names = type_.field_names

    def walk(inp: DataInput, keep: bool) -> dict | None:
        start = inp.pos
        flags = inp.read_ubyte("POJO flags")
        if flags & _POJO_NULL:
            return None
        if flags != _POJO_EXACT:  # a subclass: its own serializer, not stored
            raise Undelimited(f"a subclass of POJO {type_.type_name} (flags 0x{flags:02x} at {inp.base + start})")
        out = {}
        for name, f in zip(names, fields):
            if inp.read_bool("POJO field null flag"):
                value = None
            elif keep:
                value = f.read(inp)
            else:
                f.skip(inp)
                value = None
            out[name] = value
        return out

    return Codec(type_, lambda inp: walk(inp, True), lambda inp: walk(inp, False))


def _row(type_: FlinkType, fields: list[Codec]) -> Codec:
    offset = 2 if type_.row_kind else 0
    nbits = offset + len(fields)
    mask_bytes = (nbits + 7) // 8

    def walk(inp: DataInput, keep: bool) -> Row | None:
        mask = int.from_bytes(inp.read_bytes(mask_bytes, "Row null mask"), "big")
        kind = 0
        if offset:  # the first two mask bits are the RowKind's byte value, low bit first
            kind = (mask >> (mask_bytes * 8 - 1) & 1) | (mask >> (mask_bytes * 8 - 2) & 1) << 1
        out: list[Any] = []
        for i, f in enumerate(fields):
            if mask >> (mask_bytes * 8 - 1 - offset - i) & 1:
                out.append(None)
            elif keep:
                out.append(f.read(inp))
            else:
                f.skip(inp)
        return Row(ROW_KINDS[kind], tuple(out)) if keep else None

    return Codec(type_, lambda inp: walk(inp, True), lambda inp: walk(inp, False))


def _nullable(type_: FlinkType, inner: Codec) -> Codec:
    padding = type_.padding
    width = 1 + inner.width if padding and inner.width == padding else None

    def read(inp: DataInput) -> Any:
        if inp.read_bool("nullable flag"):
            inp.skip(padding, "null padding")
            return None
        return inner.read(inp)

    def skip(inp: DataInput) -> None:
        if inp.read_bool("nullable flag"):
            inp.skip(padding, "null padding")
        else:
            inner.skip(inp)

    return Codec(type_, read, skip if width is None else None, width)


def _either(type_: FlinkType, left: Codec, right: Codec) -> Codec:
    def read(inp: DataInput) -> dict:
        return {"left": left.read(inp)} if inp.read_bool("Either side") else {"right": right.read(inp)}

    def skip(inp: DataInput) -> None:
        (left if inp.read_bool("Either side") else right).skip(inp)

    return Codec(type_, read, skip)


def _enum(type_: FlinkType) -> Codec:
    symbols = type_.symbols

    def read(inp: DataInput) -> str:
        start = inp.pos
        ordinal = inp.read_int("enum ordinal")
        if not 0 <= ordinal < len(symbols):
            raise inp.corrupt(f"enum ordinal {ordinal} outside {type_.type_name}'s {len(symbols)} constants",
                              start, 4)
        return symbols[ordinal]

    return Codec(type_, read, width=4)


def _string(type_: FlinkType) -> Codec:
    def skip(inp: DataInput) -> None:
        n = inp.read_varint("string length")
        if n:
            # Every char is a 7-bit varint: skip bytes until n-1 terminal bytes were seen.
            data, pos, end = inp.data, inp.pos, inp.end
            remaining = n - 1
            while remaining:
                if pos >= end:
                    raise inp.corrupt("truncated string", inp.pos, end - inp.pos)
                if data[pos] < 0x80:
                    remaining -= 1
                pos += 1
            inp.pos = pos

    return Codec(type_, lambda inp: inp.read_string_value(), skip)


def codec_for(type_: FlinkType) -> Codec:
    """The codec of values of ``type_``."""
    kind = type_.kind
    make = _SCALARS.get(kind)
    if make is not None:
        return make(type_)
    kids = [codec_for(c) for c in type_.children]
    if kind.startswith("array:"):
        element_kind = kind[len("array:"):]
        element = _SCALARS[element_kind](FlinkType(element_kind, "", 0, b""))
        return _sized(type_, element, kind)
    if kind == "list":
        return _sized(type_, kids[0], "list")
    if kind == "linked-list":
        return _masked(type_, kids[0])
    if kind == "set":
        return _flagged(type_, kids[0], "set", present_is_true=False)
    if kind == "object-array":
        return _flagged(type_, kids[0], "array", present_is_true=True)
    if kind in ("map", "sorted-map"):  # the table runtime's SortedMap writes entries as Flink's Map does
        return _map(type_, kids[0], kids[1])
    if kind == "tuple":
        return _sequence(type_, kids, tuple)
    if kind == "ttl":
        return _sequence(type_, kids, lambda v: TtlValue(v[0], v[1]))
    if kind == "timer":
        timestamp = _fixed(type_, "q", unflip_timestamp)
        return _sequence(type_, [timestamp] + kids, lambda v: Timer(*v))
    if kind == "pojo":
        return _pojo(type_, kids)
    if kind == "row":
        return _row(type_, kids)
    if kind == "nullable":
        return _nullable(type_, kids[0])
    if kind == "either":
        return _either(type_, kids[0], kids[1])
    if kind == "enum":
        return _enum(type_)
    if kind == "external":  # the internal serializer writes the values
        return kids[0]
    if kind in LENGTH_PREFIXED_KINDS:
        return _length_prefixed(type_)
    if kind in CEP_KINDS or kind in SCALA_KINDS:  # flink-cep's and flink-scala's own serializers
        reader = cep_reader if kind in CEP_KINDS else scala_reader
        return Codec(type_, reader(type_, [k.read for k in kids]), width=type_.length if type_.length > 0 else None)
    return _opaque(type_)


_SCALARS: dict[str, Callable[[FlinkType], Codec]] = {
    "boolean": lambda t: _fixed(t, "?"),
    "int8": lambda t: _fixed(t, "b"),
    "int16": lambda t: _fixed(t, "h"),
    "int32": lambda t: _fixed(t, "i"),
    "int64": lambda t: _fixed(t, "q"),
    "float32": lambda t: _fixed(t, "f"),
    "float64": lambda t: _fixed(t, "d"),
    "char": lambda t: Codec(t, _read_char, width=2),
    "string": _string,
    "void": lambda t: _fixed(t, "x", lambda: None),
    "void-namespace": lambda t: _fixed(t, "x", lambda: None),
    "global-window": lambda t: _fixed(t, "x", lambda: GLOBAL_WINDOW),
    "time-window": lambda t: _fixed(t, "qq", TimeWindow),
    "count-window": lambda t: _fixed(t, "q"),
    "timestamp-data": _timestamp_data,
    "decimal-data": _decimal_data,
    "bigint": lambda t: Codec(t, _read_bigint),
    "bigdec": lambda t: Codec(t, _read_bigdec),
    "date": lambda t: _fixed(t, "q", _null_min),
    "sql-date": lambda t: _fixed(t, "q", _null_min),
    "sql-time": lambda t: _fixed(t, "q", _null_min),
    "sql-timestamp": lambda t: _fixed(t, "qi", lambda ms, ns: _epoch_ns(ms // 1000 if ms != -(2**63) else ms,
                                                                         ns, null_nanos=0)),
    "instant": lambda t: _fixed(t, "qi", lambda s, ns: _epoch_ns(s, ns, null_nanos=-(2**31))),
    "local-date": lambda t: _fixed(t, "ibb", _local_date),
    "local-time": lambda t: _fixed(t, "bbbi", _local_time),
    "local-date-time": lambda t: Codec(t, _read_local_date_time, width=13),
    "bytes": lambda t: Codec(t, lambda inp: inp.read_bytes(inp.read_count("byte[] length", 1), "byte[]")),
}


def decode_cell(codec: Codec, data: bytes, *, path: str | None = None, state: str | None = None,
                base: int = 0) -> Any:
    """One whole stored cell: an opaque type (or a POJO subclass) gives its
    bytes, anything else must consume the cell exactly."""
    if codec.type.is_opaque:
        return _decode_partly_opaque(codec, data, path, state, base)
    inp = DataInput(data, base=base, path=path, state=state)
    try:
        value = codec.read(inp)
    except Undelimited:  # a POJO subclass: written by a serializer the savepoint does not describe
        return bytes(data)
    if not inp.at_end():
        raise inp.corrupt(f"{inp.remaining()} bytes left after a {codec.type.describe()} value")
    return value


def _decode_partly_opaque(codec: Codec, data: bytes, path, state, base) -> Any:
    # A composite holding an opaque part decodes when that part is last and
    # takes the rest of the cell; otherwise the cell stays bytes.
    inp = DataInput(data, base=base, path=path, state=state)
    try:
        value = _read_with_tail(codec, inp)
    except Undelimited:
        return bytes(data)
    return value if inp.at_end() else bytes(data)


def _read_with_tail(codec: Codec, inp: DataInput) -> Any:
    if codec.type.kind in ("opaque", "kryo", "avro", "value-type", "java"):
        rest = inp.read_bytes(inp.remaining())
        return rest
    if codec.type.kind == "ttl":
        timestamp = inp.read_long("TTL timestamp")
        return TtlValue(timestamp, _read_with_tail(codec_for(codec.type.children[1]), inp))
    if codec.type.kind == "scala-try":  # a Failure's Throwable (Kryo) takes the rest of the cell
        success = inp.read_bool("Try outcome")
        value = _read_with_tail(codec_for(codec.type.children[0 if success else 1]), inp)
        return {"success": value} if success else {"failure": value}
    return codec.read(inp)


# -- whole columns ---------------------------------------------------------

_NUMPY: dict[str, str] = {"int8": ">i1", "int16": ">i2", "int32": ">i4", "int64": ">i8",
                          "float32": ">f4", "float64": ">f8", "boolean": "u1"}


def _fixed_column(kind: str, offsets: np.ndarray, data: np.ndarray, skip: int) -> list | None:
    """Cells of exactly ``skip + width`` bytes as one numpy view, else ``None``."""
    dtype = np.dtype(_NUMPY[kind])
    lengths = np.diff(offsets)
    if len(lengths) == 0 or not np.all(lengths == skip + dtype.itemsize):
        return None
    block = data[offsets[0]:offsets[-1]].reshape(len(lengths), skip + dtype.itemsize)[:, skip:]
    values = np.ascontiguousarray(block).view(dtype).reshape(-1)
    if kind == "boolean":
        return [bool(v) for v in values]
    return values.tolist()


def _ascii_string_column(offsets: np.ndarray, data: np.ndarray) -> list | None:
    """StringValue cells that are all ASCII: a one-byte length prefix (length
    + 1) and one byte per char, decoded without a per-character loop."""
    lengths = np.diff(offsets).astype(np.int64)
    if len(lengths) == 0 or np.any(lengths < 1):
        return None
    block = data[offsets[0]:offsets[-1]]
    if block.size and block.max() >= 0x80:
        return None
    prefix = data[offsets[:-1]].astype(np.int64)
    nulls = prefix == 0
    if np.any(prefix[~nulls] != lengths[~nulls]) or np.any(lengths[nulls] != 1):
        return None
    starts = offsets[:-1].astype(np.int64) - offsets[0] + 1
    ends = offsets[1:].astype(np.int64) - offsets[0]
    joined = bytes(block).decode("ascii")
    out: list[str | None] = [joined[s:e] for s, e in zip(starts.tolist(), ends.tolist())]
    if nulls.any():
        for i in np.flatnonzero(nulls).tolist():
            out[i] = None
    return out


def decode_column(type_: FlinkType, column: pa.BinaryArray, *, path: str | None = None,
                  state: str | None = None) -> list:
    """Decode every cell of ``column`` (each cell one whole value of ``type_``)."""
    offsets, data = column_buffers(column)
    kind = type_.kind
    fast = None
    if kind in _NUMPY:
        fast = _fixed_column(kind, offsets, data, 0)
    elif kind == "ttl" and type_.children[1].kind in _NUMPY:
        inner = _fixed_column(type_.children[1].kind, offsets, data, 8)
        if inner is not None:
            rows = data[offsets[0]:offsets[-1]].reshape(len(inner), -1)
            stamps = np.ascontiguousarray(rows[:, :8]).view(">i8").reshape(-1).tolist()
            fast = [TtlValue(t, v) for t, v in zip(stamps, inner)]
    elif kind == "string":
        fast = _ascii_string_column(offsets, data)
    if fast is not None:
        return fast
    codec = codec_for(type_)
    raw = bytes(data)
    return [decode_cell(codec, raw[offsets[i]:offsets[i + 1]], path=path, state=state)
            for i in range(len(offsets) - 1)]
