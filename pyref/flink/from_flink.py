"""Flink types as pyref serializers, and Flink's bytes as pyref's encodings.

:func:`map_type` turns a :class:`~pyref.flink.serializers.FlinkType` into a
:class:`Mapped`: the pyref serializer of the type (its snapshot carrying
Flink's exact snapshot bytes in ``engine``, spec/serializers.md §2.4) and a
transcoder from Flink's bytes to pyref's. The mapping (the lead's decisions):

=============================================  ==========================================
Flink                                          pyref
=============================================  ==========================================
boolean, byte, short, int, long, float,        boolean, int8, int16, int32, int64,
double, char (boxed and ``*Value`` alike)      float32, float64, char
String                                         string (``nullable<string>`` when a null is
                                               stored in that place)
byte[]                                         bytes
primitive arrays, String[]                     list<T>
Object arrays                                  list<nullable<T>>
Tuple                                          tuple (fields f0, f1, ...)
POJO                                           nullable<tuple> of the POJO's fields, each
                                               nullable, in Flink's field order and names
Row                                            tuple<kind: enum, f0, f1...>, fields nullable
List / Map                                     list<T> / map<K, nullable<V>>
NullableSerializer                             nullable
enum                                           enum (its constants)
TimeWindow / GlobalWindow                      time-window / global-window
anything else (Kryo, Avro, Either, Set,        opaque: engine "flink", Flink's class and
BigInteger, dates, a user's serializer, the    snapshot bytes; values are Flink's bytes
Scala API's serializers...)
=============================================  ==========================================

Values whose length Flink does not store (Kryo, Avro, a user's type) can be
kept only as a whole cell: a composite holding one becomes opaque as a whole.

Whole columns transcode without a loop per cell where the type allows:
fixed-width numbers are byte-swapped as one numpy matrix (tuples of them
too), strings take a vectorised path when every char is ASCII (which is when
Flink's ``StringValue`` body is already UTF-8), ``byte[]`` loses its length
prefix. Anything else, and the rare non-ASCII string, goes cell by cell.

Some choices depend on the data: a null where the planned type has none (a
null String in a list), a String that UTF-8 cannot hold (a lone surrogate), a
POJO value of a subclass. The transcoder then raises :class:`Demotion`; the
importer plans that place again (nullable, or opaque) and starts over.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from ..errors import CorruptSavepointError, InvalidArgumentError, UnsupportedFormatError
from ..keys import key_type_of
from ..serializers import (
    Boolean,
    Bytes,
    Char,
    Enum,
    Float32,
    Float64,
    GlobalWindow,
    Int8,
    Int16,
    Int32,
    Int64,
    ListOf,
    MapOf,
    Nullable,
    Opaque,
    Serializer,
    String,
    TimeWindow,
    Tuple,
)
from ..serializers.base import fixed_width_binary
from .datainput import DataInput
from .scala import SCALA_KINDS
from .serializers import FlinkType
from .spans import Spans, constant, join, reversed_fixed
from .values import Undelimited, codec_for

__all__ = ["Demotion", "Mapped", "map_type", "key_type", "stores_lengths", "hashes_like_java", "ROW_KINDS", "ENGINE"]

ENGINE = "flink"
#: pyref's symbols for Flink's ``RowKind``, in byte-value order.
ROW_KINDS = ("INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE")
#: Flink kinds whose values Flink writes without a length: kept only as a whole cell.
UNDELIMITED = frozenset({"opaque", "kryo", "avro", "value-type", "java"})

_U32 = struct.Struct("<I")
_P = "org.apache.flink.api.common.typeutils.base."
#: Key classes whose Java ``hashCode`` pyref's key hash reproduces (spec/key-groups.md §3).
_JAVA_HASHED = frozenset(_P + name for name in (
    "BooleanSerializer$BooleanSerializerSnapshot", "ByteSerializer$ByteSerializerSnapshot",
    "ShortSerializer$ShortSerializerSnapshot", "IntSerializer$IntSerializerSnapshot",
    "LongSerializer$LongSerializerSnapshot", "FloatSerializer$FloatSerializerSnapshot",
    "CharSerializer$CharSerializerSnapshot", "StringSerializer$StringSerializerSnapshot"))
_TUPLE_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"


class Demotion(Exception):
    """A value the planned pyref type cannot hold: ``kind`` is "nullable" (a null
    String) or "opaque" (text UTF-8 cannot hold, a POJO subclass)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class _Whole(Exception):
    """A nested type Flink writes without a length: the enclosing cell becomes opaque."""


def hashes_like_java(type_: FlinkType) -> bool:
    """Keys of this Flink type are hashed by pyref exactly as by their Java ``hashCode``:
    String, the boxed primitives but double, and Flink Tuples of those."""
    if type_.class_name == _TUPLE_SNAPSHOT:
        return bool(type_.children) and all(hashes_like_java(c) for c in type_.children)
    return type_.class_name in _JAVA_HASHED


class Mapped:
    """A Flink type as a pyref serializer, with the transcoder of its values."""

    #: Byte-swapped field widths when a value is fixed-width numbers only, else None.
    swap: tuple[int, ...] | None = None

    def __init__(self, flink: FlinkType, serializer: Serializer) -> None:
        self.flink = flink
        # The elements of Flink's primitive arrays have no snapshot of their own.
        self.serializer = serializer.with_engine(ENGINE, flink.class_name, flink.snapshot) if flink.snapshot \
            else serializer

    @property
    def width(self) -> int | None:
        """pyref's fixed width of the encoding (framing, spec/serializers.md §4)."""
        return self.serializer.fixed_width

    @property
    def nullable(self) -> bool:
        return isinstance(self.serializer, Nullable)

    def cell(self, inp: DataInput) -> bytes:
        """pyref's encoding of the Flink value at ``inp`` (which moves past it)."""
        raise NotImplementedError

    def framed(self, inp: DataInput, out: bytearray) -> None:
        """Append the framed encoding (spec/serializers.md §4) of the value at ``inp``."""
        data = self.cell(inp)
        if self.width is None:
            out += _U32.pack(len(data))
        out += data

    def check(self, block: np.ndarray, where: str) -> None:
        """Validate the byte-swapped values of a fixed-width column (an (n, width) matrix)."""

    def column(self, cells: Spans, where: str) -> pa.BinaryArray:
        """Every cell (one whole Flink value each) as pyref's encoding."""
        if self.swap is not None:
            width = sum(self.swap)
            bad = np.flatnonzero(cells.lengths != width)
            if bad.size:
                raise CorruptSavepointError(f"a {self.flink.describe()} value of {int(cells.lengths[bad[0]])} "
                                            f"bytes, expected {width}", state=where)
            block = reversed_fixed(cells, self.swap)
            self.check(block, where)
            return fixed_width_binary(block.reshape(-1), len(cells), width)
        return self.cells(cells, np.arange(len(cells)), where)

    def cells(self, cells: Spans, rows: np.ndarray, where: str) -> pa.BinaryArray:
        """Rows ``rows`` of ``cells`` one at a time (the slow path)."""
        raw = cells.buffer.data  # a memoryview: Python ints when indexed, as DataInput expects
        out = []
        for start, length in zip(cells.starts[rows].tolist(), cells.lengths[rows].tolist()):
            inp = DataInput(raw, start, start + length, state=where)
            out.append(self.cell(inp))
            if not inp.at_end():
                raise inp.corrupt(f"{inp.remaining()} bytes left after a {self.flink.describe()} value")
        return pa.array(out, pa.binary())


class _Fixed(Mapped):
    """A big-endian fixed-width number (or two, for a time window)."""

    def __init__(self, flink: FlinkType, serializer: Serializer, swap: tuple[int, ...]) -> None:
        super().__init__(flink, serializer)
        self.swap = swap

    swap: tuple[int, ...]

    def cell(self, inp: DataInput) -> bytes:
        width = sum(self.swap)
        pos = inp.need(width, self.flink.kind)
        inp.pos = pos + width
        raw = bytes(inp.data[pos:pos + width])
        out, at = bytearray(), 0
        for w in self.swap:
            out += raw[at:at + w][::-1]
            at += w
        if type(self).check is not Mapped.check:
            self.check(np.frombuffer(bytes(out), np.uint8).reshape(1, width), inp.state or "")
        return bytes(out)


class _Boolean(_Fixed):
    def check(self, block: np.ndarray, where: str) -> None:
        if block.size and int(block.max()) > 1:
            raise CorruptSavepointError(f"a boolean byte 0x{int(block.max()):02x}", state=where)


class _GlobalWindow(_Fixed):
    def check(self, block: np.ndarray, where: str) -> None:
        if block.size and int(block.max()) != 0:
            raise CorruptSavepointError("a GlobalWindow that is not the byte 0x00", state=where)


class _Enum(_Fixed):
    def check(self, block: np.ndarray, where: str) -> None:
        ordinals = np.ascontiguousarray(block).view("<i4").reshape(-1)
        bad = np.flatnonzero((ordinals < 0) | (ordinals >= len(self.flink.symbols)))
        if bad.size:
            raise CorruptSavepointError(f"enum ordinal {int(ordinals[bad[0]])} outside {self.flink.type_name}'s "
                                        f"{len(self.flink.symbols)} constants", state=where)


class _String(Mapped):
    """Flink's ``StringValue`` (a varint of length + 1, 0 for null; a varint per UTF-16
    unit) as UTF-8, as ``nullable<string>`` once a null was seen in this place."""

    def cell(self, inp: DataInput) -> bytes:
        text = self._text(inp)
        if text is None:
            if not self.nullable:
                raise Demotion("nullable", "a null String")
            return b"\x00"
        return b"\x01" + text if self.nullable else text

    @staticmethod
    def _text(inp: DataInput) -> bytes | None:
        """The UTF-8 of the String at ``inp``, None for null."""
        text = inp.read_string_value()
        if text is None:
            return None
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            raise Demotion("opaque", f"a String UTF-8 cannot hold (a lone surrogate in {text[:40]!r})") from None

    def column(self, cells: Spans, where: str) -> pa.BinaryArray:
        n = len(cells)
        if not n:
            return pa.array([], pa.binary())
        bad = np.flatnonzero(cells.lengths < 1)
        if bad.size:
            raise CorruptSavepointError("an empty String cell", state=where)
        # The length varint: 1 to 3 bytes (a String has fewer than 2**21 chars in practice;
        # longer ones, and every non-ASCII one, take the slow path).
        buf, starts, lengths = cells.buffer, cells.starts, cells.lengths
        last = len(buf) - 1
        b0 = buf[starts].astype(np.int64)
        b1 = buf[np.minimum(starts + 1, last)].astype(np.int64)
        b2 = buf[np.minimum(starts + 2, last)].astype(np.int64)
        prefix = np.where(b0 < 0x80, 1, np.where(b1 < 0x80, 2, np.where(b2 < 0x80, 3, 0)))
        declared = np.where(prefix == 1, b0, np.where(prefix == 2, (b0 & 0x7F) | (b1 << 7),
                                                      (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)))
        # As many body bytes as chars, none with the varint continuation bit, means all are
        # ASCII (a high last byte would be a truncated char: corrupt, left to the slow path).
        null = (prefix == 1) & (b0 == 0) & (lengths == 1)
        fast = (prefix > 0) & (prefix <= lengths) & (lengths - prefix == declared - 1) & (declared > 0)
        high = np.concatenate([[0], np.cumsum(buf >= 0x80, dtype=np.int64)])
        ends = starts + lengths
        fast &= high[ends] - high[np.minimum(starts + prefix, ends)] == 0
        if null.any() and not self.nullable:
            raise Demotion("nullable", "a null String")
        body = cells.cut(prefix, np.where(fast, lengths - prefix, 0))
        slow = np.flatnonzero(~fast & ~null)
        if slow.size:  # non-ASCII (or unusual) cells: decoded one by one (none is null)
            raw = buf.data
            texts = []
            for start, length in zip(starts[slow].tolist(), lengths[slow].tolist()):
                inp = DataInput(raw, start, start + length, state=where)
                texts.append(self._text(inp))
                if not inp.at_end():
                    raise inp.corrupt(f"{inp.remaining()} bytes left after a String")
            patch = Spans.of(pa.array(texts, pa.binary()))
            mask = np.zeros(n, bool)
            mask[slow] = True
            body = body.where(mask, _scatter(patch, slow, n))
        if not self.nullable:
            return body.column()
        flags = constant(b"\x00\x01", n, 1)
        flags = Spans(flags.buffer, (~null).astype(np.int64), flags.lengths)
        return join(flags, Spans(body.buffer, body.starts, np.where(null, 0, body.lengths)))


def _scatter(spans: Spans, rows: np.ndarray, n: int) -> Spans:
    """``spans`` placed at ``rows`` of ``n`` rows (other rows empty)."""
    starts = np.zeros(n, np.int64)
    lengths = np.zeros(n, np.int64)
    starts[rows] = spans.starts
    lengths[rows] = spans.lengths
    return Spans(spans.buffer, starts, lengths)


class _Bytes(Mapped):
    """``byte[]``: Flink's int length then the bytes; pyref's bytes alone."""

    def cell(self, inp: DataInput) -> bytes:
        return inp.read_bytes(inp.read_count("byte[] length"), "byte[]")

    def column(self, cells: Spans, where: str) -> pa.BinaryArray:
        if len(cells) and (cells.lengths < 4).any():
            raise CorruptSavepointError("a byte[] cell shorter than its length", state=where)
        declared = np.ascontiguousarray(reversed_fixed(cells, (4,))).view("<i4").reshape(-1).astype(np.int64)
        bad = np.flatnonzero(declared != cells.lengths - 4)
        if bad.size:
            raise CorruptSavepointError(f"a byte[] of {int(cells.lengths[bad[0]]) - 4} bytes says it has "
                                        f"{int(declared[bad[0]])}", state=where)
        return cells.cut(4).column()


class _Opaque(Mapped):
    """A type pyref does not describe: Flink's bytes as they are. ``delimited`` when
    Flink's codec can step over a value (a BigInteger, an Either...), so it can be
    a part of a composite; otherwise only a whole cell."""

    def __init__(self, flink: FlinkType, delimited: bool) -> None:
        super().__init__(flink, Opaque(ENGINE, flink.class_name, flink.snapshot))
        self._codec = codec_for(flink) if delimited else None

    def cell(self, inp: DataInput) -> bytes:
        if self._codec is None:
            raise _Whole(self.flink.describe())
        start = inp.pos
        try:
            self._codec.skip(inp)
        except Undelimited:  # a part written by a serializer the savepoint does not describe
            raise _Whole(self.flink.describe()) from None
        return bytes(inp.data[start:inp.pos])

    def column(self, cells: Spans, where: str) -> pa.BinaryArray:
        return cells.column()


class _WholeCell(_Opaque):
    """A cell holding a part Flink writes without a length: the whole cell, as stored."""

    def __init__(self, flink: FlinkType) -> None:
        super().__init__(flink, delimited=False)


class _Nulled:
    """A place Flink marks null by a flag of its own (POJO and Row fields, Map values,
    object array elements, ``NullableSerializer``): pyref's nullable of the inner type,
    or the inner type itself when that is already nullable."""

    def __init__(self, inner: Mapped) -> None:
        self.inner = inner
        self.serializer = inner.serializer if inner.nullable else Nullable(inner.serializer)

    def cell(self, inp: DataInput, present: bool) -> bytes:
        if not present:
            return b"\x00"
        return self.inner.cell(inp) if self.inner.nullable else b"\x01" + self.inner.cell(inp)

    def framed(self, inp: DataInput, out: bytearray, present: bool) -> None:
        data = self.cell(inp, present)
        out += _U32.pack(len(data))
        out += data


class _Tuple(Mapped):
    def __init__(self, flink: FlinkType, fields: list[Mapped]) -> None:
        super().__init__(flink, Tuple(*(f.serializer for f in fields)))
        self.fields = fields
        swaps = [f.swap for f in fields]
        if all(swap is not None for swap in swaps):
            self.swap = tuple(w for swap in swaps if swap is not None for w in swap)

    def check(self, block: np.ndarray, where: str) -> None:
        at = 0
        for f in self.fields:
            assert f.swap is not None  # checked only when every field is fixed-width
            width = sum(f.swap)
            f.check(block[:, at:at + width], where)
            at += width

    def cell(self, inp: DataInput) -> bytes:
        out = bytearray()
        for f in self.fields:
            f.framed(inp, out)
        return bytes(out)


_POJO_NULL, _POJO_EXACT = 1, 2


class _Pojo(Mapped):
    def __init__(self, flink: FlinkType, fields: list[Mapped]) -> None:
        self.fields = [_Nulled(f) for f in fields]
        super().__init__(flink, Nullable(Tuple(*(f.serializer for f in self.fields), names=flink.field_names)))

    def cell(self, inp: DataInput) -> bytes:
        flags = inp.read_ubyte("POJO flags")
        if flags & _POJO_NULL:
            return b"\x00"
        if flags != _POJO_EXACT:
            raise Demotion("opaque", f"a value of a subclass of POJO {self.flink.type_name} (flags 0x{flags:02x})")
        out = bytearray(b"\x01")
        for f in self.fields:
            f.framed(inp, out, not inp.read_bool("POJO field null flag"))
        return bytes(out)


class _Row(Mapped):
    def __init__(self, flink: FlinkType, fields: list[Mapped]) -> None:
        self.fields = [_Nulled(f) for f in fields]
        names = ("kind", *(f"f{i}" for i in range(len(fields))))
        super().__init__(flink, Tuple(Enum(ROW_KINDS), *(f.serializer for f in self.fields), names=names))
        self._offset = 2 if flink.row_kind else 0
        self._mask_bytes = (self._offset + len(fields) + 7) // 8

    def cell(self, inp: DataInput) -> bytes:
        mask = int.from_bytes(inp.read_bytes(self._mask_bytes, "Row null mask"), "big")
        top = self._mask_bytes * 8 - 1
        kind = (mask >> top & 1) | (mask >> (top - 1) & 1) << 1 if self._offset else 0
        out = bytearray(struct.pack("<i", kind))
        for i, f in enumerate(self.fields):
            f.framed(inp, out, not mask >> (top - self._offset - i) & 1)
        return bytes(out)


class _List(Mapped):
    """List, primitive arrays, String[]: Flink's int count then the elements."""

    def __init__(self, flink: FlinkType, element: Mapped) -> None:
        super().__init__(flink, ListOf(element.serializer))
        self.element = element

    def cell(self, inp: DataInput) -> bytes:
        n = inp.read_count(f"{self.flink.kind} length")
        out = bytearray(_U32.pack(n))
        for _ in range(n):
            self.element.framed(inp, out)
        return bytes(out)


class _ObjectArray(Mapped):
    """``T[]`` of objects: int count, then per element a present flag and the element."""

    def __init__(self, flink: FlinkType, element: Mapped) -> None:
        self.element = _Nulled(element)
        super().__init__(flink, ListOf(self.element.serializer))

    def cell(self, inp: DataInput) -> bytes:
        n = inp.read_count("array length")
        out = bytearray(_U32.pack(n))
        for _ in range(n):
            self.element.framed(inp, out, inp.read_bool("array element flag"))
        return bytes(out)


class _Map(Mapped):
    """``Map``: int count, then per entry the key, a null flag and the value."""

    def __init__(self, flink: FlinkType, key: Mapped, value: Mapped) -> None:
        self.key, self.value = key, _Nulled(value)
        super().__init__(flink, MapOf(key.serializer, self.value.serializer))

    def cell(self, inp: DataInput) -> bytes:
        n = inp.read_count("map size")
        out = bytearray(_U32.pack(n))
        for _ in range(n):
            self.key.framed(inp, out)
            self.value.framed(inp, out, not inp.read_bool("map value null flag"))
        return bytes(out)


class _FlinkNullable(Mapped):
    """``NullableSerializer``: a null flag, then the padding (null) or the value."""

    def __init__(self, flink: FlinkType, inner: Mapped) -> None:
        self.inner = _Nulled(inner)
        super().__init__(flink, self.inner.serializer)

    def cell(self, inp: DataInput) -> bytes:
        null = inp.read_bool("nullable flag")
        if null:
            inp.skip(self.flink.padding, "null padding")
        return self.inner.cell(inp, not null)


_NUMBERS: dict[str, tuple[Callable[[], Serializer], int]] = {
    "int8": (Int8, 1), "int16": (Int16, 2), "int32": (Int32, 4), "int64": (Int64, 8),
    "float32": (Float32, 4), "float64": (Float64, 8), "char": (Char, 2)}
_PRIMITIVE_ARRAYS = ("boolean", "int16", "int32", "int64", "float32", "float64", "char", "string")


def map_type(type_: FlinkType, *, nullable_strings: bool = False, opaque: bool = False) -> Mapped:
    """The pyref form of a whole stored cell of ``type_``. ``nullable_strings``: Strings
    in it may be null; ``opaque``: keep the cells as Flink's bytes."""
    if opaque or type_.kind in UNDELIMITED:
        return _WholeCell(type_)
    try:
        return _map(type_, nullable_strings)
    except _Whole:
        return _WholeCell(type_)


def _element(kind: str) -> FlinkType:
    """The element type of a primitive array (no snapshot of its own in Flink)."""
    return FlinkType(kind, f"element:{kind}", 0, b"", length=_NUMBERS.get(kind, (None, -1))[1])


def _map(t: FlinkType, nullable_strings: bool) -> Mapped:
    kind = t.kind
    if kind in UNDELIMITED:
        raise _Whole(t.describe())
    if kind in _NUMBERS:
        make, width = _NUMBERS[kind]
        return _Fixed(t, make(), (width,))
    if kind == "boolean":
        return _Boolean(t, Boolean(), (1,))
    if kind == "string":
        return _String(t, Nullable(String()) if nullable_strings else String())
    if kind == "bytes":
        return _Bytes(t, Bytes())
    if kind == "time-window":
        return _Fixed(t, TimeWindow(), (8, 8))
    if kind == "global-window":
        return _GlobalWindow(t, GlobalWindow(), (1,))
    if kind in SCALA_KINDS:  # Flink's bytes, whatever their parts: a Scala value is written back as Flink wrote it
        return _Opaque(t, delimited=True)
    if kind == "enum":
        try:
            return _Enum(t, Enum(t.symbols), (4,))
        except InvalidArgumentError:  # no constants, say: nothing pyref's enum can name
            return _Opaque(t, delimited=True)
    kids = [_map(c, nullable_strings) for c in t.children]
    try:
        if kind.startswith("array:") and kind[6:] in _PRIMITIVE_ARRAYS:
            return _List(t, _map(_element(kind[6:]), nullable_strings))
        if kind == "list":
            return _List(t, kids[0])
        if kind == "object-array":
            return _ObjectArray(t, kids[0])
        if kind == "map":
            return _Map(t, kids[0], kids[1])
        if kind == "tuple" and kids:
            return _Tuple(t, kids)
        if kind == "pojo" and kids:
            return _Pojo(t, kids)
        if kind == "row" and kids:
            return _Row(t, kids)
        if kind == "nullable":
            return _FlinkNullable(t, kids[0])
    except InvalidArgumentError:  # e.g. a map key pyref's map does not allow (float64...)
        pass
    return _Opaque(t, delimited=True)


def stores_lengths(type_: FlinkType) -> bool:
    """Whether Flink writes values of ``type_`` so that one can be told from the next
    (a LIST state's elements must be)."""
    return not isinstance(map_type(type_), _WholeCell)


def key_type(mapped: Mapped):
    """pyref's key type of keys of this mapping when pyref hashes them as Java does, else None."""
    if not hashes_like_java(mapped.flink):
        return None
    try:
        return key_type_of(mapped.serializer.snapshot())
    except UnsupportedFormatError:  # a nullable<string> after a null key, say: not hashable
        return None
