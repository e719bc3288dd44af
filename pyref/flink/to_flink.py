"""pyref serializers as Flink serializers: the snapshot bytes Flink reads back.

A serializer whose snapshot carries the engine's own snapshot (``engine.engine ==
"flink"``, spec/serializers.md §2.4: every serializer imported from Flink) is
written back byte for byte. Any other is mapped to the Flink serializer a Java job
declares for the same values (the reverse of the import mapping):

============================  ==========================================================
pyref                         Flink
============================  ==========================================================
boolean, int8, int16, int32,  Boolean, Byte, Short, Integer, Long, Float, Double,
int64, float32, float64, char Character (``BasicTypeInfo``)
string, nullable<string>      String (``StringSerializer`` writes null itself)
bytes                         ``byte[]``
list<T>                       ``java.util.List<T>`` (``ListSerializer``)
map<K, V>, map<K, nullable<V>> ``java.util.Map<K, V>`` (``MapSerializer`` flags null values)
tuple (1 to 25 fields)        ``TupleN`` (field names are not kept: Flink's tuples have none)
nullable<T>                   ``NullableSerializer`` of T (no null padding)
time-window, global-window    ``TimeWindow``, ``GlobalWindow``
opaque (engine "flink")       its engine snapshot
============================  ==========================================================

Nothing else has a Flink counterpart: ``json``, ``protobuf``, a user-defined
serializer, an ``enum`` (Flink's ``EnumSerializer`` names the Java enum class, which
only an imported snapshot knows), an ``opaque`` serializer of another engine and a
tuple of more than 25 fields are refused with
:class:`~pyref.errors.UnsupportedFormatError` naming the state and the serializer.

Every snapshot written is parsed back with the reader's
:func:`~pyref.flink.serializers.read_versioned_snapshot`, which gives the
:class:`~pyref.flink.serializers.FlinkType` the values are transcoded to
(:mod:`pyref.flink.transcode`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .._proto.savepoint.v1 import serializer_pb2
from ..errors import CorruptSavepointError, UnsupportedFormatError
from .datainput import DataInput
from .serializers import NESTED_LAST_KINDS, FlinkType, at_position, read_versioned_snapshot, snapshot_class
from .dataoutput import utf

__all__ = [
    "FlinkSerializer",
    "flink_serializer",
    "list_serializer",
    "map_serializer",
    "ttl_serializer",
    "timer_serializer",
    "VOID_NAMESPACE",
    "MAX_TUPLE_ARITY",
    "snapshot_label",
]

#: Flink's tuple classes go up to Tuple25.
MAX_TUPLE_ARITY = 25
_COMPOSITE_MAGIC = 911108  # CompositeTypeSerializerSnapshot
_NESTED_MAGIC = 1333245  # NestedSerializersSnapshotDelegate
_SIMPLE_VERSION = 3  # SimpleTypeSerializerSnapshot and CompositeTypeSerializerSnapshot write version 3
_TUPLE_CLASS = "org.apache.flink.api.java.tuple.Tuple{}"
_TTL = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"
_TIMER = "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot"
_NULLABLE = "org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot"
_VOID_NAMESPACE = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
#: pyref built-ins whose Flink serializer is a SimpleTypeSerializerSnapshot of the same kind.
_SIMPLE_KINDS = ("boolean", "int8", "int16", "int32", "int64", "float32", "float64", "char", "string", "bytes",
                 "time-window", "global-window")


@dataclass(frozen=True)
class FlinkSerializer:
    """A Flink serializer: its snapshot as ``writeVersionedSnapshot`` writes it (class
    name, version, body) and the type that snapshot describes."""

    snapshot: bytes
    type: FlinkType

    @classmethod
    def parse(cls, snapshot: bytes, where: str) -> FlinkSerializer:
        inp = DataInput(snapshot, state=where)
        try:
            parsed = read_versioned_snapshot(inp, at_position(len(snapshot)))
        except CorruptSavepointError as exc:
            raise CorruptSavepointError(f"the Flink serializer snapshot kept with the state does not parse: "
                                        f"{exc.reason}", state=where) from None
        if inp.pos != len(snapshot):
            raise CorruptSavepointError(f"{len(snapshot) - inp.pos} bytes after the Flink serializer snapshot kept "
                                        "with the state", state=where)
        return cls(snapshot, parsed)

    @property
    def proxied(self) -> bytes:
        """The snapshot behind ``TypeSerializerSnapshotSerializationUtil``'s version (2),
        as state meta info and the keyed backend's key serializer store it."""
        return struct.pack(">i", 2) + self.snapshot


def _simple(kind: str) -> bytes:
    return utf(snapshot_class(kind)) + struct.pack(">i", _SIMPLE_VERSION)


def _composite(class_name: str, outer_version: int, outer: bytes, nested: list[bytes]) -> bytes:
    """``CompositeTypeSerializerSnapshot``: magic, outer version and snapshot, then the
    nested snapshots (``NestedSerializersSnapshotDelegate``: magic, version 1, count)."""
    return (utf(class_name) + struct.pack(">iii", _SIMPLE_VERSION, _COMPOSITE_MAGIC, outer_version) + outer
            + struct.pack(">iii", _NESTED_MAGIC, 1, len(nested)) + b"".join(nested))


def _refuse(snapshot: serializer_pb2.SerializerSnapshot, where: str, why: str) -> UnsupportedFormatError:
    return UnsupportedFormatError(f"serializer {snapshot_label(snapshot)} has no Flink counterpart: {why}", state=where)


def snapshot_label(snapshot: serializer_pb2.SerializerSnapshot) -> str:
    """A pyref serializer as errors name it: ``map<string,nullable<int64>>``."""
    inner = ",".join(snapshot_label(n) for n in snapshot.nested)
    return f"{snapshot.serializer_id}{f'<{inner}>' if inner else ''}"


def _engine_snapshot(snapshot: serializer_pb2.SerializerSnapshot) -> bytes | None:
    if snapshot.HasField("engine") and snapshot.engine.engine == "flink" and snapshot.engine.snapshot:
        return snapshot.engine.snapshot
    return None


def _snapshot_bytes(snapshot: serializer_pb2.SerializerSnapshot, where: str, *, nulls_handled: bool = False) -> bytes:
    """Flink's snapshot of ``snapshot``; ``nulls_handled``: the enclosing Flink serializer
    writes a null flag itself (a map's values), so a nullable here is its inner type."""
    kept = _engine_snapshot(snapshot)
    if kept is not None:
        return kept
    sid = snapshot.serializer_id
    if sid in _SIMPLE_KINDS:
        return _simple(sid)
    if sid == "nullable":
        inner = snapshot.nested[0]
        if nulls_handled or (inner.serializer_id == "string" and _engine_snapshot(inner) is None):
            return _snapshot_bytes(inner, where)
        return _composite(_NULLABLE, 2, struct.pack(">i", 0), [_snapshot_bytes(inner, where)])
    if sid == "list":
        return _composite(snapshot_class("list"), 1, b"", [_snapshot_bytes(snapshot.nested[0], where)])
    if sid == "map":
        key, value = snapshot.nested
        return _composite(snapshot_class("map"), 1, b"",
                          [_snapshot_bytes(key, where), _snapshot_bytes(value, where, nulls_handled=True)])
    if sid == "tuple":
        arity = len(snapshot.nested)
        if arity > MAX_TUPLE_ARITY:
            raise _refuse(snapshot, where, f"Flink's tuples have at most {MAX_TUPLE_ARITY} fields, this one {arity}")
        return _composite(snapshot_class("tuple"), 2, utf(_TUPLE_CLASS.format(arity)),
                          [_snapshot_bytes(f, where) for f in snapshot.nested])
    if sid == "enum":
        raise _refuse(snapshot, where, "Flink's EnumSerializer names the Java enum class, which only a state "
                                       "imported from Flink keeps (in its engine snapshot)")
    if sid == "opaque":
        engine = snapshot.engine.engine or "unknown"
        raise _refuse(snapshot, where, f"its values are bytes of the {engine!r} engine's serializer "
                                       f"{snapshot.engine.class_name!r}, which Flink cannot read")
    if "." in sid:
        raise _refuse(snapshot, where, "a user-defined serializer; only one imported from Flink keeps Flink's "
                                       "snapshot (in its engine field)")
    raise _refuse(snapshot, where, f"Flink has no built-in serializer for {sid} values")


def flink_serializer(snapshot: serializer_pb2.SerializerSnapshot, where: str, *, nulls_handled: bool = False,
                     release: tuple[int, int] = (2, 3)) -> FlinkSerializer:
    """The Flink serializer of the values ``snapshot`` describes (``where`` names the
    state for errors) as the Flink ``release`` (major, minor) reads it; ``nulls_handled``:
    the values are a MAP state's, whose null flag Flink writes itself, so a nullable is
    its inner type."""
    serializer = FlinkSerializer.parse(_snapshot_bytes(snapshot, where, nulls_handled=nulls_handled), where)
    if release < ROW_KIND_FLAG_SINCE:
        serializer = FlinkSerializer.parse(_without_row_kind_flag(serializer.type, where), where)
    return serializer


#: Flink 1.14 wrote RowSerializerSnapshot's outer version 4: a boolean after it says whether the
#: rows carry their RowKind. Flink 1.13 knows version 3 only (RowKind always there) and would read
#: that byte as the start of the nested snapshots (a snapshot kept from a 1.14+ import).
ROW_KIND_FLAG_SINCE = (1, 14)


def _without_row_kind_flag(flink_type: FlinkType, where: str) -> bytes:
    """The snapshot of ``flink_type`` with every RowSerializerSnapshot of outer version 4
    written as version 3 (without the flag): the same rows, when they carry their RowKind."""
    nested = [_without_row_kind_flag(child, where) for child in flink_type.children]
    kept_nested = b"".join(child.snapshot for child in flink_type.children)
    at = len(utf(flink_type.class_name)) + 8  # the outer version: after the class, version and magic
    flagged = (flink_type.kind == "row" and flink_type.version > 2
               and struct.unpack_from(">i", flink_type.snapshot, at)[0] == 4)
    if not flagged and b"".join(nested) == kept_nested:
        return flink_type.snapshot
    if flink_type.kind not in NESTED_LAST_KINDS:
        raise UnsupportedFormatError(f"a Row serializer of Flink 1.14+ inside {flink_type.describe()}: Flink 1.13 "
                                     "reads only its older snapshot, which pyref writes only inside composite "
                                     "serializers", state=where)
    head = flink_type.snapshot[:len(flink_type.snapshot) - len(kept_nested)]
    if flagged:
        if not flink_type.row_kind:
            raise UnsupportedFormatError("a Row serializer whose rows carry no RowKind (the legacy mode of Flink "
                                         "1.14+): Flink 1.13's rows always carry it", state=where)
        head = head[:at] + struct.pack(">i", 3) + head[at + 5:]
    return head + b"".join(nested)


def list_serializer(element: FlinkSerializer, where: str) -> FlinkSerializer:
    """``ListSerializer`` of ``element``: what a LIST state's meta info names."""
    return FlinkSerializer.parse(_composite(snapshot_class("list"), 1, b"", [element.snapshot]), where)


def map_serializer(key: FlinkSerializer, value: FlinkSerializer, where: str) -> FlinkSerializer:
    """``MapSerializer`` of a MAP state's user keys and values."""
    return FlinkSerializer.parse(_composite(snapshot_class("map"), 1, b"", [key.snapshot, value.snapshot]), where)


def ttl_serializer(value: FlinkSerializer, where: str) -> FlinkSerializer:
    """``TtlSerializer``: the last-access timestamp (a long), then the value."""
    return FlinkSerializer.parse(_composite(_TTL, 2, b"", [_simple("int64"), value.snapshot]), where)


def timer_serializer(key: FlinkSerializer, namespace: FlinkSerializer, where: str) -> FlinkSerializer:
    """``TimerSerializer`` of a timer service's queue: timestamp, key, namespace."""
    return FlinkSerializer.parse(_composite(_TIMER, 2, b"", [key.snapshot, namespace.snapshot]), where)


#: ``VoidNamespaceSerializer``: the namespace of state outside windows.
VOID_NAMESPACE = FlinkSerializer.parse(utf(_VOID_NAMESPACE) + struct.pack(">i", _SIMPLE_VERSION), "void namespace")
