"""Flink ``TypeSerializerSnapshot`` bytes parsed into a model of the stored type.

A snapshot is written by ``TypeSerializerSnapshot.writeVersionedSnapshot``:
the snapshot class name (``writeUTF``), an int version, then a body only that
class knows how to read, with no length in front. The classes Flink ships for
the types state is usually made of are parsed here exactly (primitives and
their boxed and ``Value`` forms, String, arrays, Tuple, Row, POJO, List, Map,
Set, Either, nullable wrappers, enums, Avro, windows, timers, TTL), the Scala API's
(``flink-scala``: case classes, Option, Either, Try, collections, Enumeration, Unit,
Nothing; a collection's ``cbfCode`` is kept as text, never compiled), and the table
runtime's serializers of Flink SQL state (``RowData``: its field serializers
are parsed, the Java-serialized ``LogicalType`` of each field before them is
stepped over exactly, unread (:mod:`.java_stream`), see :func:`_read_row_data`;
its values stay Flink's bytes, each delimited by its length; ``StringData``,
``TimestampData``, ``DecimalData``, ``RawValueData``, ``ArrayData`` and
``MapData`` (also MULTISET's), whose snapshots are only Java serialization
streams, ``ExternalSerializer``, the ``SortedMap`` of Top-N over an updating
input and the table runtime's windows). A table-runtime snapshot of another
class is refused where its end can only be guessed across Java-serialized
bytes (their class names look like snapshots). Anything
else (Kryo's registrations with Java-serialized parts, a user's own snapshot)
is kept opaque, its class name and exact bytes preserved; its end is found by
*resynchronising*: the first position after it where the bytes that must
follow it (the next nested snapshot, the next state's meta info, the start of
the state data) parse is taken as its end. Every snapshot keeps its exact
bytes (``FlinkType.snapshot``) so an exporter can write it back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .datainput import DataInput
from .java_stream import JAVA_STREAM_MAGIC, skip_java_stream

__all__ = [
    "FlinkType",
    "Follow",
    "read_versioned_snapshot",
    "read_serializer_snapshot",
    "looks_like_versioned_snapshot",
    "SNAPSHOT_PROXY_VERSION",
    "LENGTH_PREFIXED_KINDS",
    "NESTED_LAST_KINDS",
    "traversable_collection",
]

#: ``TypeSerializerSnapshotSerializationUtil``'s own version, written before a
#: top-level snapshot (state meta info, key serializer).
SNAPSHOT_PROXY_VERSION = 2

_COMPOSITE_MAGIC = 911108  # CompositeTypeSerializerSnapshot
_NESTED_MAGIC = 1333245  # NestedSerializersSnapshotDelegate
_OPTIONAL_MAP_HEADER = 0x4F2C69A3D70  # LinkedOptionalMapSerializer

#: A predicate over a position: does a valid continuation of the enclosing
#: structure start here? Used only to find the end of an opaque snapshot.
Follow = Callable[[DataInput], bool]


@dataclass(frozen=True)
class FlinkType:
    """The type a Flink serializer snapshot describes.

    ``kind`` names the encoding (``int64``, ``string``, ``tuple``, ``pojo``,
    ``list``, ``map``, ``ttl``, ``timer``, ``opaque``...); ``children`` are the
    nested types in Flink's order (tuple/row/POJO fields, list element, map
    key then value, TTL's timestamp then value, timer's key then namespace).
    ``length`` is Flink's ``TypeSerializer.getLength()`` (-1 = variable),
    which decides how RocksDB-format keys are composed.
    """

    kind: str
    class_name: str
    version: int
    snapshot: bytes = field(repr=False)
    children: tuple[FlinkType, ...] = ()
    length: int = -1
    type_name: str | None = None  # the Java class of the values (POJO, tuple, enum, Kryo, Avro...)
    field_names: tuple[str, ...] = ()  # POJO fields
    symbols: tuple[str, ...] = ()  # enum constants, ordinal order
    schema: str | None = None  # Avro schema JSON
    padding: int = 0  # NullableSerializer's null padding
    row_kind: bool = False  # RowSerializer writes the RowKind in its mask
    subclasses: tuple[str, ...] = ()  # POJO subclasses registered or seen (not decodable)
    precision: int = 0  # the table runtime's TimestampData / DecimalData
    scale: int = 0  # DecimalData
    previous_timestamp: bool = False  # CEP's NFAState: each match stores its previous event's time
    null_mask: bool = False  # the table runtime's LinkedList writes one (outer version 2 on)
    #: The table runtime's Java-serialized ``LogicalType`` classes (ArrayData's element,
    #: MapData's key and value), short names, e.g. ``("VarCharType", "BigIntType")``.
    logical_types: tuple[str, ...] = ()
    #: A Scala collection's ``cbfCode``: Scala source Flink compiles on restore; pyref keeps it as text, never runs it.
    cbf_code: str | None = None
    symbol_ids: tuple[int, ...] = ()  # a Scala Enumeration's value ids, in the order of ``symbols``

    @property
    def is_opaque(self) -> bool:
        """True when values of this type cannot be decoded, only kept as bytes."""
        return self.kind in _OPAQUE_KINDS or any(c.is_opaque for c in self.children)

    def describe(self) -> str:
        """A short human-readable type, e.g. ``tuple<int64,string>``."""
        name = self.kind
        if self.kind in ("opaque", "kryo", "avro", "value-type", "java", "scala-case-class", "scala-enum") \
                and self.type_name:
            name = f"{self.kind}:{self.type_name}"
        elif self.kind == "opaque":
            name = f"opaque:{self.class_name}"
        elif self.kind == "timestamp-data":
            name = f"timestamp-data({self.precision})"
        elif self.kind == "decimal-data":
            name = f"decimal-data({self.precision},{self.scale})"
        elif self.kind == "scala-traversable":
            name = f"{self.kind}:{(traversable_collection(self.cbf_code or '') or '?').split('[', 1)[0]}"
        elif self.logical_types:
            name = f"{self.kind}({','.join(self.logical_types)})"
        if self.children and self.kind != "ttl":
            name += "<" + ",".join(c.describe() for c in self.children) + ">"
        elif self.kind == "ttl":
            name = f"ttl<{self.children[1].describe()}>"
        return name


_OPAQUE_KINDS = frozenset({"opaque", "kryo", "avro", "value-type", "java"})
#: Kinds whose values are an int length, then that many bytes, kept as Flink's bytes.
LENGTH_PREFIXED_KINDS = frozenset({"row-data", "string-data", "raw-value", "array-data", "map-data"})

# SimpleTypeSerializerSnapshot subclasses (empty body in version 3): kind, getLength().
_P = "org.apache.flink.api.common.typeutils.base."
_CEP = "org.apache.flink.cep.nfa."
_A = "org.apache.flink.api.common.typeutils.base.array."
_SCALA = "org.apache.flink.api.scala.typeutils."
_SIMPLE: dict[str, tuple[str, int]] = {
    _P + "BooleanSerializer$BooleanSerializerSnapshot": ("boolean", 1),
    _P + "ByteSerializer$ByteSerializerSnapshot": ("int8", 1),
    _P + "ShortSerializer$ShortSerializerSnapshot": ("int16", 2),
    _P + "IntSerializer$IntSerializerSnapshot": ("int32", 4),
    _P + "LongSerializer$LongSerializerSnapshot": ("int64", 8),
    _P + "FloatSerializer$FloatSerializerSnapshot": ("float32", 4),
    _P + "DoubleSerializer$DoubleSerializerSnapshot": ("float64", 8),
    _P + "CharSerializer$CharSerializerSnapshot": ("char", 2),
    _P + "StringSerializer$StringSerializerSnapshot": ("string", -1),
    _P + "VoidSerializer$VoidSerializerSnapshot": ("void", 1),
    _P + "BigIntSerializer$BigIntSerializerSnapshot": ("bigint", -1),
    _P + "BigDecSerializer$BigDecSerializerSnapshot": ("bigdec", -1),
    _P + "DateSerializer$DateSerializerSnapshot": ("date", 8),
    _P + "SqlDateSerializer$SqlDateSerializerSnapshot": ("sql-date", 8),
    _P + "SqlTimeSerializer$SqlTimeSerializerSnapshot": ("sql-time", 8),
    _P + "SqlTimestampSerializer$SqlTimestampSerializerSnapshot": ("sql-timestamp", 12),
    _P + "InstantSerializer$InstantSerializerSnapshot": ("instant", 12),
    _P + "LocalDateSerializer$LocalDateSerializerSnapshot": ("local-date", 6),
    _P + "LocalTimeSerializer$LocalTimeSerializerSnapshot": ("local-time", 7),
    _P + "LocalDateTimeSerializer$LocalDateTimeSerializerSnapshot": ("local-date-time", 13),
    # Flink's mutable Value types encode exactly like the boxed types.
    _P + "BooleanValueSerializer$BooleanValueSerializerSnapshot": ("boolean", 1),
    _P + "ByteValueSerializer$ByteValueSerializerSnapshot": ("int8", 1),
    _P + "ShortValueSerializer$ShortValueSerializerSnapshot": ("int16", 2),
    _P + "IntValueSerializer$IntValueSerializerSnapshot": ("int32", 4),
    _P + "LongValueSerializer$LongValueSerializerSnapshot": ("int64", 8),
    _P + "FloatValueSerializer$FloatValueSerializerSnapshot": ("float32", 4),
    _P + "DoubleValueSerializer$DoubleValueSerializerSnapshot": ("float64", 8),
    _P + "CharValueSerializer$CharValueSerializerSnapshot": ("char", 2),
    _P + "StringValueSerializer$StringValueSerializerSnapshot": ("string", -1),
    _A + "BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot": ("bytes", -1),
    _A + "BooleanPrimitiveArraySerializer$BooleanPrimitiveArraySerializerSnapshot": ("array:boolean", -1),
    _A + "ShortPrimitiveArraySerializer$ShortPrimitiveArraySerializerSnapshot": ("array:int16", -1),
    _A + "IntPrimitiveArraySerializer$IntPrimitiveArraySerializerSnapshot": ("array:int32", -1),
    _A + "LongPrimitiveArraySerializer$LongPrimitiveArraySerializerSnapshot": ("array:int64", -1),
    _A + "FloatPrimitiveArraySerializer$FloatPrimitiveArraySerializerSnapshot": ("array:float32", -1),
    _A + "DoublePrimitiveArraySerializer$DoublePrimitiveArraySerializerSnapshot": ("array:float64", -1),
    _A + "CharPrimitiveArraySerializer$CharPrimitiveArraySerializerSnapshot": ("array:char", -1),
    _A + "StringArraySerializer$StringArraySerializerSnapshot": ("array:string", -1),
    # VoidNamespace writes one byte but reports length 0 (still "fixed" for key composition).
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot": ("void-namespace", 0),
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot":
        ("time-window", 16),
    "org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot":
        ("global-window", 1),
    "org.apache.flink.runtime.state.JavaSerializer$JavaSerializerSnapshot": ("java", -1),
    # The table runtime's StringData: an int length, then UTF-8.
    "org.apache.flink.table.runtime.typeutils.StringDataSerializer$StringDataSerializerSnapshot": ("string-data", -1),
    # The table runtime's own windows (legacy GROUP BY TUMBLE/HOP/SESSION): Flink's window encodings.
    "org.apache.flink.table.runtime.operators.window.TimeWindow$Serializer$TimeWindowSerializerSnapshot":
        ("time-window", 16),
    "org.apache.flink.table.runtime.operators.window.CountWindow$Serializer$CountWindowSerializerSnapshot":
        ("count-window", 8),
    # A data view's placeholder in an accumulator row: one zero byte, like Void.
    "org.apache.flink.table.dataview.NullSerializer$NullSerializerSnapshot": ("void", 1),
    # Flink CEP's event ids and Dewey numbers (values: pyref/flink/cep.py).
    _CEP + "DeweyNumber$DeweyNumberSerializer$DeweyNumberSerializerSnapshot": ("cep-dewey-number", -1),
    _CEP + "sharedbuffer.EventId$EventIdSerializer$EventIdSerializerSnapshot": ("cep-event-id", 12),
    # The Scala API's Unit (one zero byte) and Nothing (no values) (values: pyref/flink/scala.py).
    _SCALA + "UnitSerializer$UnitSerializerSnapshot": ("scala-unit", 1),
    _SCALA + "NothingSerializerSnapshot": ("scala-nothing", -1),
}

# CompositeTypeSerializerSnapshot subclasses: kind, and how their outer snapshot is read.
_COMPOSITE: dict[str, str] = {
    "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot": "tuple",
    "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot": "row",
    _P + "ListSerializerSnapshot": "list",
    "org.apache.flink.runtime.state.ArrayListSerializerSnapshot": "list",
    _P + "MapSerializerSnapshot": "map",
    _P + "SetSerializerSnapshot": "set",
    _P + "GenericArraySerializerSnapshot": "object-array",
    "org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot": "nullable",
    "org.apache.flink.api.java.typeutils.runtime.JavaEitherSerializerSnapshot": "either",
    "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot": "ttl",
    "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot": "timer",
    # RawValueData: the nested serializer wrote the bytes that follow an int length.
    "org.apache.flink.table.runtime.typeutils.RawValueDataSerializer$RawValueDataSerializerSnapshot": "raw-value",
    # Flink CEP's NFA state and shared buffer (values: pyref/flink/cep.py).
    _CEP + "NFAStateSerializerSnapshot": "cep-nfa-state",
    _CEP + "sharedbuffer.NodeId$NodeIdSerializer$NodeIdSerializerSnapshot": "cep-node-id",
    _CEP + "sharedbuffer.SharedBufferEdge$SharedBufferEdgeSerializer$SharedBufferEdgeSerializerSnapshot":
        "cep-shared-buffer-edge",
    _CEP + "sharedbuffer.SharedBufferNodeSerializerSnapshotV2": "cep-shared-buffer-node",
    _CEP + "sharedbuffer.SharedBufferNode$SharedBufferNodeSerializer$SharedBufferNodeSerializerSnapshot":
        "cep-shared-buffer-node-v1",
    _CEP + "sharedbuffer.LockableTypeSerializerSnapshot": "cep-lockable",
    # The table runtime's LinkedList (ARRAY_AGG's accumulator lists): a null mask, then the elements.
    "org.apache.flink.table.runtime.typeutils.LinkedListSerializer$LinkedListSerializerSnapshot": "linked-list",
    # The Scala API's (values: pyref/flink/scala.py). A case class's outer snapshot is its class, a
    # collection's its cbfCode; the Tuple2 snapshot is the Scala API's own for scala.Tuple2.
    _SCALA + "ScalaCaseClassSerializerSnapshot": "scala-case-class",
    _SCALA + "Tuple2CaseClassSerializerSnapshot": "scala-case-class",
    _SCALA + "ScalaOptionSerializerSnapshot": "scala-option",
    _SCALA + "ScalaEitherSerializerSnapshot": "scala-either",
    _SCALA + "ScalaTrySerializerSnapshot": "scala-try",
    _SCALA + "TraversableSerializerSnapshot": "scala-traversable",
}

_T = "org.apache.flink.table.runtime.typeutils."
#: Kinds whose snapshot ends with its nested snapshots (a NestedSerializersSnapshotDelegate is
#: written last), so a writer can replace them in place: the composites, RowData and ExternalSerializer.
NESTED_LAST_KINDS = frozenset(_COMPOSITE.values()) | {"row-data", "external"}
_ROW_DATA = _T + "RowDataSerializer$RowDataSerializerSnapshot"
_BINARY_ROW = _T + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot"
_TIMESTAMP_DATA = _T + "TimestampDataSerializer$TimestampDataSerializerSnapshot"
_DECIMAL_DATA = _T + "DecimalDataSerializer$DecimalSerializerSnapshot"
_EXTERNAL = _T + "ExternalSerializer$ExternalSerializerSnapshot"
#: ArrayData / MapData snapshots: only Java serialization streams, LogicalTypes then serializers.
_JAVA_ONLY: dict[str, tuple[str, int]] = {
    _T + "ArrayDataSerializer$ArrayDataSerializerSnapshot": ("array-data", 1),
    _T + "MapDataSerializer$MapDataSerializerSnapshot": ("map-data", 2),
}
_SORTED_MAP = _T + "SortedMapSerializerSnapshot"
#: TimestampData up to this precision is one long (epoch ms), else the long and an int (nanos of the ms).
TIMESTAMP_COMPACT_PRECISION = 3
#: DecimalData up to this precision is its unscaled long, else the unscaled bytes after an int length.
DECIMAL_COMPACT_PRECISION = 18
_TABLE_PACKAGE = "org.apache.flink.table."
_ENUM = _P + "EnumSerializer$EnumSerializerSnapshot"
_SCALA_ENUM = _SCALA + "ScalaEnumSerializerSnapshot"
_POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
_KRYO = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
_AVRO = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"
# GenericTypeSerializerSnapshot subclasses: the body is the value class name.
_GENERIC_CLASS: dict[str, str] = {
    "org.apache.flink.api.java.typeutils.runtime.ValueSerializer$ValueSerializerSnapshot": "value-type",
    "org.apache.flink.api.java.typeutils.runtime.CopyableValueSerializer$CopyableValueSerializerSnapshot":
        "value-type",
}

_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.")


def _is_class_name(name: str) -> bool:
    return (0 < len(name) <= 1024 and name[0] not in "0123456789." and not name.endswith(".")
            and ".." not in name and all(c in _IDENT_CHARS for c in name))


def _probe(inp: DataInput, pos: int, check: Callable[[DataInput], bool]) -> bool:
    """Run ``check`` on a copy of ``inp`` at ``pos``; a failed read is a no."""
    probe = DataInput(inp.data, pos, inp.end, base=inp.base, path=inp.path, state=inp.state)
    try:
        return check(probe)
    except CorruptSavepointError:
        return False


def looks_like_versioned_snapshot(inp: DataInput) -> bool:
    """Does a ``writeVersionedSnapshot`` (class name, small version) start here?"""
    if inp.remaining() < 6:
        return False
    n = (inp.data[inp.pos] << 8) | inp.data[inp.pos + 1]
    if n == 0 or n > 1024:
        return False
    # A class name is ASCII: other bytes are refused undecoded (probes run at every position).
    raw = inp.read_bytes(inp.read_ushort("snapshot class"), "snapshot class")
    return raw.isascii() and _is_class_name(raw.decode("ascii")) and 0 <= inp.read_int("snapshot version") <= 100


def at_position(end: int) -> Follow:
    """The continuation is known to start exactly at ``end``."""

    def follow(inp: DataInput) -> bool:
        return inp.pos == end

    follow.position = end  # type: ignore[attr-defined]  # lets a resynchronisation jump there, not scan
    return follow


#: How far an opaque snapshot's end is searched for (Flink's own snapshots are
#: far smaller; the bound keeps hostile input from costing a scan per byte of a file).
MAX_OPAQUE_SNAPSHOT = 1 << 20


def _resync(inp: DataInput, start: int, follow: Follow, what: str) -> int:
    """The first position ``>= start`` where ``follow`` accepts the bytes."""
    known = getattr(follow, "position", None)
    if known is not None and start <= known <= inp.end:
        return known
    stop = min(inp.end, start + MAX_OPAQUE_SNAPSHOT, start + inp.scan_budget)
    for pos in range(start, stop + 1):
        if _probe(inp, pos, follow):
            inp.scan_budget -= pos - start
            return pos
    inp.scan_budget -= stop - start
    raise inp.corrupt(f"cannot find the end of {what}: nothing that may follow it parses within "
                      f"{MAX_OPAQUE_SNAPSHOT} bytes", start, min(inp.end - start, MAX_OPAQUE_SNAPSHOT))


def read_serializer_snapshot(inp: DataInput, follow: Follow) -> FlinkType:
    """A top-level snapshot (``TypeSerializerSnapshotSerializationUtil``):
    an int proxy version, then a versioned snapshot."""
    start = inp.pos
    version = inp.read_int("serializer snapshot proxy version")
    if version != SNAPSHOT_PROXY_VERSION:
        raise inp.corrupt(
            f"serializer snapshot proxy version {version}: only version {SNAPSHOT_PROXY_VERSION} "
            "(a TypeSerializerSnapshot, as Flink 1.13 to 2.3 write it) can be read", start, 4)
    return read_versioned_snapshot(inp, follow)


#: How deep snapshots may nest (a list of maps of POJOs...). Flink sets no limit; this one
#: keeps hostile input from exhausting the stack, and lies far above real types and above
#: what pyref itself exports (its 32 levels, plus Flink's list, map and TTL wrappers).
MAX_SNAPSHOT_DEPTH = 64


def read_versioned_snapshot(inp: DataInput, follow: Follow, depth: int = 1) -> FlinkType:
    """One ``writeVersionedSnapshot``: class name, int version, body; ``depth`` is its
    nesting level (1 at the top)."""
    start = inp.pos
    if depth > MAX_SNAPSHOT_DEPTH:
        raise inp.corrupt(f"serializer snapshots nested more than {MAX_SNAPSHOT_DEPTH} levels deep", start)
    class_name = inp.read_utf("serializer snapshot class")
    if not _is_class_name(class_name):
        raise inp.corrupt(f"serializer snapshot class {class_name!r} is not a Java class name", start,
                          inp.pos - start)
    version = inp.read_int("serializer snapshot version")
    body = inp.pos
    try:
        parsed = _read_known_body(inp, class_name, version, follow, depth)
    except CorruptSavepointError:
        if class_name not in _EXACT_ONLY:
            raise
        parsed = None
    if parsed is None:
        # Unknown class or a body with Java-serialized parts: keep it opaque.
        inp.pos = _resync(inp, body, follow, f"serializer snapshot {class_name}")
        _refuse_guessed_java_end(inp, class_name, body, follow)
        kind, type_name = "opaque", None
        if class_name == _KRYO:
            kind, type_name = "kryo", _peek_utf(inp, body)
        elif class_name in _GENERIC_CLASS:
            kind, type_name = _GENERIC_CLASS[class_name], _peek_utf(inp, body)
        parsed = dict(kind=kind, type_name=type_name)
    snapshot = bytes(inp.data[start:inp.pos])
    return FlinkType(class_name=class_name, version=version, snapshot=snapshot, **parsed)


def _refuse_guessed_java_end(inp: DataInput, class_name: str, body: int, follow: Follow) -> None:
    """The table runtime writes Java-serialized types into snapshots; the class names in
    them parse as a following snapshot, so an end found by resynchronising across them
    may be a guess inside them: refused, unless the end was known."""
    if (class_name.startswith(_TABLE_PACKAGE) and getattr(follow, "position", None) is None
            and JAVA_STREAM_MAGIC in inp.data[body:inp.pos]):
        raise UnsupportedFormatError(
            f"serializer snapshot {class_name} (a table runtime class pyref does not parse) holds Java-serialized "
            "objects, so where it ends cannot be told from its bytes", path=inp.path, state=inp.state,
            byte_range=(inp.base + body, inp.base + inp.pos))


# Snapshot classes whose exact parser may legitimately fail (Java-serialized
# parts) and then fall back to resynchronisation instead of an error.
_EXACT_ONLY = frozenset({_KRYO})


def _peek_utf(inp: DataInput, pos: int) -> str | None:
    probe = DataInput(inp.data, pos, inp.end, base=inp.base, path=inp.path, state=inp.state)
    try:
        return probe.read_utf()
    except CorruptSavepointError:
        return None


def _read_known_body(inp: DataInput, class_name: str, version: int, follow: Follow, depth: int) -> dict | None:
    """Parse a known snapshot body; ``None`` for a class kept opaque."""
    if class_name in _SIMPLE:
        kind, length = _SIMPLE[class_name]
        if version < 3:
            inp.read_utf("legacy serializer class")  # SimpleTypeSerializerSnapshot before v3
        return dict(kind=kind, length=length)
    if class_name in _COMPOSITE:
        return _read_composite(inp, _COMPOSITE[class_name], version, follow, depth)
    if class_name == _ENUM:
        if version != 3:
            return None
        enum_class = inp.read_utf("enum class")
        count = inp.read_count("enum constant count", 2)
        symbols = tuple(inp.read_utf("enum constant") for _ in range(count))
        return dict(kind="enum", length=4, type_name=enum_class, symbols=symbols)
    if class_name == _SCALA_ENUM and version == 3:
        return _read_scala_enum(inp)
    if class_name == _POJO:
        return _read_pojo(inp, version, depth)
    if class_name == _KRYO:
        return _read_kryo(inp, version)
    if class_name == _AVRO:
        if version < 2:
            return None
        schema = inp.read_utf("avro schema")
        return dict(kind="avro", schema=schema, type_name=inp.read_utf("avro class"))
    if class_name in _GENERIC_CLASS and version == 2:
        return dict(kind=_GENERIC_CLASS[class_name], type_name=inp.read_utf("value class"))
    if class_name == _ROW_DATA and version == 3:
        return _read_row_data(inp, follow, depth)
    if class_name == _BINARY_ROW and version == 3:
        inp.read_count("BinaryRowData field count", 1)
        return dict(kind="row-data")
    if class_name == _TIMESTAMP_DATA and version == 1:
        precision = _read_precision(inp, "TimestampData", 9)
        return dict(kind="timestamp-data", precision=precision,
                    length=8 if precision <= TIMESTAMP_COMPACT_PRECISION else 12)
    if class_name == _DECIMAL_DATA and version == 3:
        precision = _read_precision(inp, "DecimalData", 38)
        scale = inp.read_int("DecimalData scale")
        if not 0 <= scale <= precision:
            raise inp.corrupt(f"DecimalData scale {scale} outside 0..{precision}", inp.pos - 4, 4)
        return dict(kind="decimal-data", precision=precision, scale=scale)  # getLength() is -1 even when compact
    if class_name == _EXTERNAL and version == 3:
        return _read_external(inp, follow, depth)
    if class_name in _JAVA_ONLY and version == 3:
        kind, types = _JAVA_ONLY[class_name]
        logical = _skip_java_streams(inp, types, f"the Java-serialized LogicalTypes of a {kind} snapshot")
        _skip_java_streams(inp, types, f"the Java-serialized serializers of a {kind} snapshot")
        return dict(kind=kind, logical_types=tuple(name.rsplit(".", 1)[-1] if name else "?" for name in logical))
    if class_name == _SORTED_MAP and version == 3:
        # The comparator (generated code, Java-serialized: never read), then key and value serializers.
        _skip_java_streams(inp, 1, "the Java-serialized comparator of a SortedMap snapshot")
        children = _read_nested(inp, follow, depth, "SortedMap", 2)
        return dict(kind="sorted-map", children=children)
    return None


def _read_precision(inp: DataInput, what: str, most: int) -> int:
    precision = inp.read_int(f"{what} precision")
    if not 0 <= precision <= most:
        raise inp.corrupt(f"{what} precision {precision} outside 0..{most}", inp.pos - 4, 4)
    return precision


def _skip_java_streams(inp: DataInput, count: int, what: str) -> tuple[str | None, ...]:
    """Step over ``count`` whole Java serialization streams (``InstantiationUtil.serializeObject``
    writes each with its own header), never read: only Java could. Returns each one's class."""
    return tuple(skip_java_stream(inp, what) for _ in range(count))


def _read_external(inp: DataInput, follow: Follow, depth: int) -> dict:
    """``ExternalSerializerSnapshot`` (a composite, outer version 1): the ``DataType``
    Java-serialized, the ``isInternalInput`` flag, then the one internal serializer, which
    writes the values (so they are its values)."""
    start = inp.pos
    if inp.read_int("composite serializer magic") != _COMPOSITE_MAGIC:
        raise inp.corrupt("ExternalSerializer snapshot: bad magic number", start, 4)
    outer_version = inp.read_int("outer snapshot version")
    if outer_version != 1:
        raise inp.corrupt(f"ExternalSerializer snapshot: unknown outer version {outer_version}", inp.pos - 4, 4)
    _skip_java_streams(inp, 1, "the Java-serialized DataType of an ExternalSerializer snapshot")
    inp.read_bool("ExternalSerializer internal input flag")
    (internal,) = _read_nested(inp, follow, depth, "ExternalSerializer", 1)
    return dict(kind="external", children=(internal,), length=internal.length)


def _read_row_data(inp: DataInput, follow: Follow, depth: int) -> dict:
    """``RowDataSerializerSnapshot`` (version 3): a field count, each field's ``LogicalType``
    Java-serialized (one ``ObjectOutputStream`` each, never read: only Java could), then the
    field serializers' snapshots (``NestedSerializersSnapshotDelegate``, as many)."""
    count = inp.read_count("RowData field count", 4)
    _skip_java_streams(inp, count, "the Java-serialized field types of a RowData snapshot")
    children = _read_nested(inp, follow, depth, "RowData", count)
    return dict(kind="row-data", children=children)


def _read_nested(inp: DataInput, follow: Follow, depth: int, kind: str,
                 expected: int | None = None) -> tuple[FlinkType, ...]:
    """``NestedSerializersSnapshotDelegate``: magic, version 1, count, snapshots; a ``kind`` of
    snapshot with a fixed number of nested serializers (``expected``) has exactly that many."""
    start = inp.pos
    if inp.read_int("nested serializers magic") != _NESTED_MAGIC:
        raise inp.corrupt("nested serializer snapshots: bad magic number", start, 4)
    version = inp.read_int("nested serializers version")
    if version != 1:
        raise inp.corrupt(f"nested serializer snapshots: unknown version {version}", start + 4, 4)
    count = inp.read_count("nested serializer count", 6)
    if expected is not None and count != expected:
        raise inp.corrupt(f"{kind} serializer snapshot has {count} nested serializers, expected {expected}",
                          inp.pos - 4, 4)
    children = []
    for i in range(count):
        last = i == count - 1
        children.append(read_versioned_snapshot(inp, follow if last else looks_like_versioned_snapshot, depth + 1))
    return tuple(children)


def _read_composite(inp: DataInput, kind: str, version: int, follow: Follow, depth: int) -> dict:
    """``CompositeTypeSerializerSnapshot``: magic, outer version, outer snapshot, nested."""
    outer_version = version  # before base version 3 the outer version was the snapshot version
    if version > 2:
        start = inp.pos
        if inp.read_int("composite serializer magic") != _COMPOSITE_MAGIC:
            raise inp.corrupt(f"{kind} serializer snapshot: bad magic number", start, 4)
        outer_version = inp.read_int("outer snapshot version")
    extra: dict = {}
    if kind == "tuple":
        extra["type_name"] = inp.read_utf("tuple class")
    elif kind == "scala-case-class":
        extra["type_name"] = inp.read_utf("case class")
    elif kind == "scala-traversable":
        extra["cbf_code"] = inp.read_utf("Scala collection cbfCode")
    elif kind == "object-array":
        extra["type_name"] = inp.read_utf("array component class")
    elif kind == "nullable":
        extra["padding"] = inp.read_int("null padding length")
        if not 0 <= extra["padding"] <= inp.remaining():
            raise inp.corrupt(f"null padding length {extra['padding']}", inp.pos - 4, 4)
    elif kind == "linked-list":
        extra["null_mask"] = outer_version == 2 or (outer_version > 2 and inp.read_bool("null mask flag"))
    elif kind == "row":
        extra["row_kind"] = outer_version == 3 or (outer_version > 3 and inp.read_bool("row kind flag"))
    elif kind == "cep-nfa-state":  # outer version 2 (Flink 1.16+) added the flag
        extra["previous_timestamp"] = outer_version >= 2 and inp.read_bool("NFA state previous timestamp flag")
    expected = {"list": 1, "linked-list": 1, "set": 1, "object-array": 1, "nullable": 1, "map": 2, "either": 2,
                "ttl": 2, "timer": 2, "raw-value": 1, "cep-nfa-state": 3, "cep-node-id": 1, "cep-shared-buffer-edge": 2,
                "cep-shared-buffer-node": 1, "cep-shared-buffer-node-v1": 1, "cep-lockable": 1, "scala-option": 1,
                "scala-either": 2, "scala-try": 2, "scala-traversable": 1}.get(kind)
    children = _read_nested(inp, follow, depth, kind, expected)
    return dict(kind=kind, children=children, length=_composite_length(kind, children, extra), **extra)


def _composite_length(kind: str, children: tuple[FlinkType, ...], extra: dict) -> int:
    lengths = [c.length for c in children]
    if kind in ("tuple", "scala-case-class"):  # TupleSerializerBase: fixed only when every field is > 0
        return sum(lengths) if lengths and all(n > 0 for n in lengths) else -1
    if kind == "ttl":  # CompositeSerializer: fixed when every field is >= 0
        return sum(lengths) if all(n >= 0 for n in lengths) else -1
    if kind == "timer":
        return 8 + sum(lengths) if all(n >= 0 for n in lengths) else -1
    if kind == "nullable":
        return 1 + extra["padding"] if extra["padding"] > 0 else -1
    return -1


def _read_optional_map(inp: DataInput, what: str) -> list[tuple[str, tuple[int, int] | None, tuple[int, int] | None]]:
    """``LinkedOptionalMapSerializer``: header, count, (name, [framed key], [framed value])
    entries; returns the byte ranges of the frames."""
    start = inp.pos
    if inp.read_long(f"{what} header") != _OPTIONAL_MAP_HEADER:
        raise inp.corrupt(f"{what}: bad header", start, 8)
    entries = []
    for _ in range(inp.read_count(f"{what} size", 4)):
        name = inp.read_utf(f"{what} entry name")
        frames: list[tuple[int, int] | None] = []
        for part in ("key", "value"):
            if inp.read_bool(f"{what} {part} presence"):
                size = inp.read_count(f"{what} {part} frame length")
                frames.append((inp.need(size, f"{what} {part} frame"), size))
                inp.pos += size
            else:
                frames.append(None)
        entries.append((name, frames[0], frames[1]))
    return entries


def _framed_snapshot(inp: DataInput, frame: tuple[int, int], what: str, depth: int) -> FlinkType:
    pos, size = frame
    sub = DataInput(inp.data, pos, pos + size, base=inp.base, path=inp.path, state=inp.state)
    result = read_versioned_snapshot(sub, at_position(pos + size), depth)
    if sub.pos != pos + size:
        raise sub.corrupt(f"{what}: {pos + size - sub.pos} bytes left in its frame")
    return result


def _read_scala_enum(inp: DataInput) -> dict:
    """``ScalaEnumSerializerSnapshot`` (version 3): the ``Enumeration`` object's class, an int
    count, then each value's name (``writeUTF``) and int id; values are written as their id."""
    enum_class = inp.read_utf("Scala Enumeration class")
    count = inp.read_count("Scala Enumeration value count", 6)
    names, ids = [], []
    for _ in range(count):
        names.append(inp.read_utf("Scala Enumeration value name"))
        ids.append(inp.read_int("Scala Enumeration value id"))
    if len(set(ids)) != len(ids):
        raise inp.corrupt(f"Scala Enumeration {enum_class} lists a value id twice")
    return dict(kind="scala-enum", length=4, type_name=enum_class, symbols=tuple(names), symbol_ids=tuple(ids))


_CAN_BUILD_FROM = "CanBuildFrom["


def traversable_collection(cbf_code: str) -> str | None:
    """The collection type ``cbfCode`` builds, read as text (never compiled): the first type
    argument of its ``CanBuildFrom[...]``, e.g. ``scala.collection.immutable.List[String]``;
    ``None`` when the text does not have that shape."""
    start = cbf_code.find(_CAN_BUILD_FROM)
    if start < 0:
        return None
    depth, begin = 0, start + len(_CAN_BUILD_FROM)
    for i in range(begin, len(cbf_code)):
        c = cbf_code[i]
        if c in "[(":
            depth += 1
        elif c in "])":
            if depth == 0:
                return None
            depth -= 1
        elif c == "," and depth == 0:
            return cbf_code[begin:i].strip() or None
    return None


def _read_pojo(inp: DataInput, version: int, depth: int) -> dict | None:
    """``PojoSerializerSnapshotData``: class, fields map, two subclass maps."""
    if version != 2:
        return None
    pojo_class = inp.read_utf("POJO class")
    names, children = [], []
    for name, _key, value in _read_optional_map(inp, "POJO fields"):
        if value is None:
            raise inp.corrupt(f"POJO field {name!r} has no serializer snapshot")
        names.append(name)
        children.append(_framed_snapshot(inp, value, f"POJO field {name!r}", depth + 1))
    subclasses = _read_optional_map(inp, "POJO registered subclasses")
    subclasses += _read_optional_map(inp, "POJO non-registered subclasses")
    return dict(kind="pojo", type_name=pojo_class, field_names=tuple(names), children=tuple(children),
                subclasses=tuple(name for name, _, _ in subclasses))


def _read_kryo(inp: DataInput, version: int) -> dict | None:
    """``KryoSerializerSnapshotData`` (version 2): the type class, then the Kryo registrations,
    the default serializer instances and the default serializer classes, each a
    ``LinkedOptionalMap`` whose entries are framed, so that Java-serialized serializer
    instances among them are stepped over whole."""
    if version != 2:
        return None
    type_class = inp.read_utf("Kryo type class")
    for what in ("Kryo registrations", "Kryo default serializers", "Kryo default serializer classes"):
        _read_optional_map(inp, what)
    return dict(kind="kryo", type_name=type_class)


def snapshot_class(kind: str) -> str:
    """The class of Flink's own serializer snapshot for values of ``kind`` (``int64``,
    ``list``, ``tuple``...), the one the tables above list first: what a writer of
    Flink snapshots names (Flink's boxed types before their ``Value`` twins).

    Callers pass kinds the tables hold; any other is a programming error (``KeyError``)."""
    for class_name, (simple_kind, _) in _SIMPLE.items():
        if simple_kind == kind:
            return class_name
    for class_name, composite in _COMPOSITE.items():
        if composite == kind:
            return class_name
    raise KeyError(f"no Flink serializer snapshot class for kind {kind!r}")
