"""Views of the states of one Flink operator: list, union and broadcast
operator state, keyed state (value, list, map, reducing, aggregating) and
timers, shaped like :mod:`pyref.reader`'s views.

``to_arrow()`` gives every view's entries decoded, as Arrow columns (``to_pandas()``
as a DataFrame); a column whose values stay Flink's bytes (an opaque type: Kryo,
Avro, a SQL ``RowData``...; or values Arrow cannot hold, a ``GlobalWindow``) says
so in its field metadata, :data:`FLINK_BYTES` mapping to the Flink type.
``to_arrow(raw=True)`` gives the stored bytes of every column (what an importer
transcodes a column at a time); ``items()`` decodes to Python values.
Keyed rows carry the key group Flink stored them under, never a recomputed one.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from ..errors import CorruptSavepointError, InvalidArgumentError, UnsupportedFormatError
from ..key_groups import assign_to_key_group, compute_key_groups
from ..reader import TableView
from .composite import split_keys, split_list_values, split_map_values, split_timer_keys
from .handles import DistributionMode
from .keyed import KeyedRows
from .meta_info import StateMetaInfo, unreadable_async_state
from .row_keys import row_key_groups
from .serializers import FlinkType
from .values import Row, TtlValue, decode_column

__all__ = [
    "KeyedStateKind",
    "FlinkListStateView",
    "FlinkBroadcastStateView",
    "FlinkKeyedStateView",
    "FlinkTimerView",
    "freeze",
    "FLINK_BYTES",
]

#: Field metadata key of a column left as Flink's stored bytes; its value is the Flink type.
FLINK_BYTES = b"pyref.flink.bytes"

#: Flink's ``KEYED_STATE_TYPE`` names of the keyed state kinds read here.
KeyedStateKind = str
KEYED_KINDS = ("VALUE", "LIST", "MAP", "REDUCING", "AGGREGATING", "FOLDING")


def freeze(value: Any) -> Any:
    """A hashable stand-in for a decoded value (dicts and lists become tuples),
    used to look keys up."""
    if isinstance(value, dict):
        return tuple((k, freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


class _TooManyObjects(Exception):
    """Decoded values that Arrow would need far more objects for than their bytes."""


#: Objects a column's decoded values may become for Arrow per stored byte (a struct of one-byte
#: fields needs fewer; a Scala case class of thousands of empty fields, no bytes a value, more):
#: beyond it the column stays Flink's bytes.
_OBJECTS_PER_BYTE = 2


def _plain(value: Any, type_: FlinkType, budget: list[int]) -> Any:
    """A decoded value as Arrow infers it: a Tuple, POJO or Row as a struct (fields ``f0``...,
    the POJO's names, a Row's ``kind`` first), a Map as a list of key / value structs, a
    named tuple (a TimeWindow) as a struct of its fields. ``budget``: objects left to make."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooManyObjects
    kind, kids = type_.kind, type_.children
    if value is None:
        return None
    if kind in ("nullable", "external") and kids:
        return _plain(value, kids[0], budget)
    if kind == "pojo" and isinstance(value, dict):
        return {name: _plain(value.get(name), t, budget) for name, t in zip(type_.field_names, kids)}
    if kind in ("map", "sorted-map") and len(kids) == 2 and isinstance(value, (dict, list)):
        pairs = value.items() if isinstance(value, dict) else value
        return [{"key": _plain(k, kids[0], budget), "value": _plain(v, kids[1], budget)} for k, v in pairs]
    if isinstance(value, Row):
        return {"kind": value.kind, **{f"f{i}": _plain(v, t, budget)
                                       for i, (v, t) in enumerate(zip(value.fields, kids))}}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return value._asdict()
    if isinstance(value, tuple):
        return {f"f{i}": _plain(v, t, budget) for i, (v, t) in enumerate(zip(value, kids))}
    if isinstance(value, list):
        return [_plain(v, kids[0] if kids else type_, budget) for v in value]
    return value


def _in_value_order(type_: pa.DataType, values: list[Any]) -> pa.DataType:
    """``type_``, as pyarrow inferred it from ``values``, with each struct's fields in the order
    of the values' keys (a POJO's declared order, a window's start before end): pyarrow 14,
    the floor, infers them sorted by name."""
    if pa.types.is_struct(type_):
        first = next((v for v in values if isinstance(v, dict)), None)
        names = list(first) if first is not None and len(first) == type_.num_fields else [f.name for f in type_]
        fields = []
        for name in names:
            field = type_.field(name)
            kids = [v.get(name) for v in values if isinstance(v, dict)] if pa.types.is_nested(field.type) else []
            fields.append(pa.field(name, _in_value_order(field.type, kids), field.nullable, field.metadata))
        return pa.struct(fields)
    if pa.types.is_list(type_):
        return pa.list_(_in_value_order(type_.value_type, [e for v in values if isinstance(v, list) for e in v]))
    return type_


def _column(name: str, values: list[Any], stored: pa.Array, type_: FlinkType,
            lists: bool = False) -> tuple[pa.Field, pa.Array]:
    """A column of values decoded as ``type_`` (``lists``: lists of them, a LIST state's);
    the stored bytes, said so in the field's metadata, where the values are those bytes
    (an opaque type) or Arrow cannot hold them."""
    if not len(stored):  # no value to tell the type by
        return pa.field(name, pa.null()), pa.nulls(0)
    if values != stored.to_pylist():
        budget = [_OBJECTS_PER_BYTE * stored.nbytes + 4096]
        try:
            plain = [[_plain(e, type_, budget) for e in v] if lists and isinstance(v, list)
                     else _plain(v, type_, budget) for v in values]
            array = pa.array(plain)
            if (ordered := _in_value_order(array.type, plain)) != array.type:
                array = pa.array(plain, ordered)
            return pa.field(name, array.type), array
        except (pa.ArrowException, TypeError, ValueError, OverflowError, _TooManyObjects):
            pass  # a GlobalWindow, a Map of mixed key types, values of no bytes...
    return pa.field(name, stored.type, metadata={FLINK_BYTES: type_.describe()}), stored


def _decoded_table(leading: dict[str, pa.Array], columns: list[tuple[pa.Field, pa.Array]]) -> pa.Table:
    fields = [pa.field(n, a.type) for n, a in leading.items()] + [f for f, _ in columns]
    return pa.Table.from_arrays([*leading.values(), *(a for _, a in columns)], schema=pa.schema(fields))


class FlinkListStateView(TableView):
    """A list state (SPLIT_DISTRIBUTE or UNION): one partition of elements per
    subtask that wrote it, in Flink's order."""

    def __init__(self, name: str, mode: DistributionMode, element_type: FlinkType,
                 partitions: list[pa.BinaryArray]) -> None:
        self.name = self.label = name
        self.mode = mode
        self.element_type = element_type
        self.partitions = partitions

    def element_counts(self) -> list[int]:
        return [len(p) for p in self.partitions]

    def partition(self, index: int) -> list[Any]:
        """Decoded elements of the partition of subtask ``index``."""
        return decode_column(self.element_type, self.partitions[index], state=self.name)

    def elements(self) -> list[Any]:
        """Every element, partitions in subtask order."""
        return [e for i in range(len(self.partitions)) for e in self.partition(i)]

    def to_arrow(self, raw: bool = False) -> pa.Table:
        """``subtask`` and ``element`` (decoded, or with ``raw`` its bytes) of every element."""
        subtasks = pa.array(np.repeat(np.arange(len(self.partitions), dtype=np.int32), self.element_counts()))
        stored = pa.concat_arrays(self.partitions) if self.partitions else pa.array([], pa.binary())
        if raw:
            return pa.table({"subtask": subtasks, "element": stored})
        return _decoded_table({"subtask": subtasks}, [_column("element", self.elements(), stored, self.element_type)])


class FlinkBroadcastStateView(TableView):
    """A broadcast state: the (key, value) map each subtask held."""

    def __init__(self, name: str, key_type: FlinkType, value_type: FlinkType,
                 partitions: list[tuple[pa.BinaryArray, pa.BinaryArray]]) -> None:
        self.name = self.label = name
        self.key_type = key_type
        self.value_type = value_type
        self.partitions = partitions
        self.mode = DistributionMode.BROADCAST

    def element_counts(self) -> list[int]:
        return [len(k) for k, _ in self.partitions]

    def items(self, subtask: int = 0) -> list[tuple[Any, ...]]:
        keys, values = self.partitions[subtask]
        return list(zip(decode_column(self.key_type, keys, state=self.name),
                        decode_column(self.value_type, values, state=self.name)))

    def to_dict(self, subtask: int = 0) -> dict[Any, Any]:
        return {freeze(k): v for k, v in self.items(subtask)}

    def get(self, key: Any, default: Any = None, *, subtask: int = 0) -> Any:
        return self.to_dict(subtask).get(freeze(key), default)

    def to_arrow(self, raw: bool = False) -> pa.Table:
        """``subtask``, ``key`` and ``value`` (decoded, or with ``raw`` their bytes) of every
        entry of every subtask's copy."""
        counts = self.element_counts()
        empty = pa.array([], pa.binary())
        subtasks = pa.array(np.repeat(np.arange(len(counts), dtype=np.int32), counts))
        keys = pa.concat_arrays([k for k, _ in self.partitions]) if counts else empty
        values = pa.concat_arrays([v for _, v in self.partitions]) if counts else empty
        if raw:
            return pa.table({"subtask": subtasks, "key": keys, "value": values})
        entries = [item for i in range(len(counts)) for item in self.items(i)]
        return _decoded_table({"subtask": subtasks}, [
            _column("key", [k for k, _ in entries], keys, self.key_type),
            _column("value", [v for _, v in entries], values, self.value_type)])


_PYREF_KEY_TYPES = {"string": "string", "int32": "int32", "int64": "int64", "boolean": "boolean"}


def _pyref_key_type(type_: FlinkType):
    """pyref's key type for a Flink key type whose hash it reproduces, else ``None``."""
    if type_.kind in _PYREF_KEY_TYPES:
        return _PYREF_KEY_TYPES[type_.kind]
    if type_.kind == "tuple" and type_.children:
        fields = tuple(_pyref_key_type(c) for c in type_.children)
        return None if None in fields else fields
    return None


_ARROW_KEY_TYPES = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "boolean": pa.bool_()}


def _key_groups_of(keys: list[Any], key_type, max_parallelism: int) -> np.ndarray:
    """Flink's key group of every decoded key: vectorised over an Arrow column, or key by key
    when a Java String holds a lone surrogate (valid in Java, which Arrow's UTF-8 cannot hold)."""
    try:
        column = _key_column(keys, key_type)
    except UnicodeEncodeError:
        return np.array([assign_to_key_group(key, max_parallelism, key_type) for key in keys], np.int64)
    return compute_key_groups(column, max_parallelism, key_type)


def _key_column(keys: list[Any], key_type) -> pa.Array:
    """Decoded keys as the Arrow column :func:`compute_key_groups` hashes."""
    if isinstance(key_type, tuple):
        fields = [_key_column([k[i] for k in keys], t) for i, t in enumerate(key_type)]
        return pa.StructArray.from_arrays(fields, names=[f"f{i}" for i in range(len(key_type))])
    return pa.array(keys, _ARROW_KEY_TYPES[key_type])


class _KeyedRowsView(TableView):
    """Rows of a keyed-backend state: keys, namespaces, key groups, subtasks."""

    def __init__(self, key_type: FlinkType, namespace_type: FlinkType, rows: KeyedRows, prefix_bytes: int,
                 max_parallelism: int) -> None:
        self.key_type = key_type
        self.namespace_type = namespace_type
        self._rows = rows
        self._prefix = prefix_bytes
        self._max_parallelism = max_parallelism

    @property
    def _columns(self) -> dict[str, pa.Array]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._rows.keys)

    @property
    def key_groups(self) -> list[int]:
        """Key groups that hold rows (as Flink stored them)."""
        return sorted(set(self._rows.key_groups.tolist()))

    def check_key_groups(self, state: str | None = None) -> int | None:
        """Recompute every row's key group with pyref's hash (bit for bit
        Flink's for String, Integer, Long, Boolean keys and Tuples of them, and
        for Flink SQL's ``BinaryRowData`` keys) and compare with the key group
        Flink stored; returns the number of rows checked, ``None`` when the key
        type has a hash pyref does not define (a POJO's own ``hashCode``, an
        enum...). A mismatch is an error naming ``state``."""
        key_type = _pyref_key_type(self.key_type)
        row_keys = self.key_type.kind == "row-data"
        if key_type is None and not row_keys:
            return None
        if not len(self):
            return 0
        stored = self._columns["key"]
        if row_keys:  # hashed by their bytes: only a mismatch's key is converted, to name it
            expected = row_key_groups(stored, self._max_parallelism, state)
        else:
            keys = decode_column(self.key_type, stored)
            expected = _key_groups_of(keys, key_type, self._max_parallelism)
        bad = np.flatnonzero(expected != self._rows.key_groups)
        if len(bad):
            i = int(bad[0])
            key = stored[i].as_py() if row_keys else keys[i]
            raise CorruptSavepointError(f"key {key!r} is stored in key group {int(self._rows.key_groups[i])} but "
                                        f"hashes to {int(expected[i])} ({len(bad)} rows differ)", state=state)
        return len(self)

    def _leading(self) -> dict[str, pa.Array]:
        return {"subtask": pa.array(self._rows.subtasks, pa.int32()),
                "key_group": pa.array(self._rows.key_groups, pa.int32())}

    def _table(self, columns: dict[str, pa.Array]) -> pa.Table:
        return pa.table({**self._leading(), **columns})


class FlinkKeyedStateView(_KeyedRowsView):
    """One keyed state. ``value_type`` is the type of a VALUE/REDUCING/
    AGGREGATING value, a LIST element or a MAP value (TTL unwrapped: ``ttl``
    says whether cells carry a last-access timestamp)."""

    def __init__(self, name: str, kind: KeyedStateKind, key_type: FlinkType, namespace_type: FlinkType,
                 stored_type: FlinkType, rows: KeyedRows, prefix_bytes: int, max_parallelism: int) -> None:
        if kind not in KEYED_KINDS:
            raise UnsupportedFormatError(f"keyed state kind {kind!r} is not supported", state=name)
        super().__init__(key_type, namespace_type, rows, prefix_bytes, max_parallelism)
        self.name = self.label = name
        self.kind = kind
        self.stored_type = stored_type
        self.user_key_type: FlinkType | None = None
        cell = stored_type
        if kind == "LIST":
            cell = _expect(stored_type, "list", name).children[0]
        elif kind == "MAP":
            map_type = _expect(stored_type, "map", name)
            self.user_key_type, cell = map_type.children
        self.ttl = cell.kind == "ttl"
        self.cell_type = cell  # the stored cell, TTL wrapper included
        self.value_type = cell.children[1] if self.ttl else cell

    @classmethod
    def of(cls, info: StateMetaInfo, key_type: FlinkType, rows: KeyedRows, prefix_bytes: int,
           max_parallelism: int) -> FlinkKeyedStateView:
        """The view of a keyed state as its meta info describes it, or the typed refusal of one its
        meta info cannot describe (Flink 2.0's async MAP state)."""
        unreadable = unreadable_async_state(info)
        if unreadable is not None:
            raise UnsupportedFormatError(unreadable, state=info.name)
        return cls(info.name, info.options.get("KEYED_STATE_TYPE", info.backend_type), key_type,
                   info.serializers["NAMESPACE_SERIALIZER"], info.serializers["VALUE_SERIALIZER"], rows, prefix_bytes,
                   max_parallelism)

    @property
    def has_namespace(self) -> bool:
        """False for the void namespace (state outside windows)."""
        return self.namespace_type.kind != "void-namespace"

    @cached_property
    def _columns(self) -> dict[str, pa.Array]:
        parts = split_keys(self._rows.keys, self._prefix, self.key_type, self.namespace_type,
                           self.kind == "MAP", self.name)
        values = self._rows.values
        if self.kind == "MAP":
            values, nulls = split_map_values(values, self.name)
            parts["value_is_null"] = pa.array(nulls)
        parts["value"] = values
        return parts

    def to_arrow(self, raw: bool = False) -> pa.Table:
        """``subtask``, ``key_group`` (int32), then decoded ``key``, [``namespace``],
        [``user_key`` for MAP], ``value`` (a list for LIST; None for a null MAP value) and,
        under TTL, ``ttl_timestamp`` (the last access, ms; a list for LIST).

        ``raw``: the stored bytes as Arrow columns: ``key``, ``namespace``, [``user_key``,
        ``value_is_null`` for MAP], ``value`` (a MAP value without its null flag; a LIST
        value with its elements joined by ``,``; TTL cells with their 8-byte timestamp)."""
        if raw:
            return self._table(self._columns)
        stored = self._columns
        parts = [("key", self.key_type), *([("namespace", self.namespace_type)] if self.has_namespace else []),
                 *([("user_key", self.user_key_type)] if self.user_key_type is not None else [])]
        rows = list(self.items(with_ttl=True))
        decoded = [list(c) for c in zip(*rows)] if rows else [[] for _ in range(len(parts) + 1)]
        values, stamps = decoded[-1], None
        if self.ttl and not (self.kind == "LIST" and self.cell_type.is_opaque):
            def split(v: Any) -> tuple[Any, Any]:
                if self.kind == "LIST":
                    return [e.value for e in v], [e.timestamp for e in v]
                return (v.value, v.timestamp) if isinstance(v, TtlValue) else (v, None)

            pairs = [split(v) for v in values]
            values, stamps = [v for v, _ in pairs], [t for _, t in pairs]
        columns = [_column(name, column, stored[name], type_) for (name, type_), column in zip(parts, decoded)]
        columns.append(_column("value", values, stored["value"], self.value_type, lists=self.kind == "LIST"))
        if stamps is not None:
            columns.append((pa.field("ttl_timestamp", (t := pa.array(stamps)).type), t))
        return _decoded_table(self._leading(), columns)

    def list_elements(self) -> tuple[np.ndarray, pa.BinaryArray]:
        """LIST state: (row of each element, element bytes)."""
        if self.kind != "LIST":
            raise InvalidArgumentError(f"{self.name} is a {self.kind} state, not a LIST state", state=self.name)
        return split_list_values(self._columns["value"], self.cell_type, self.name)

    def _decoded_values(self, with_ttl: bool) -> list[Any]:
        columns = self._columns
        if self.kind == "LIST" and self.cell_type.is_opaque:
            # Flink stores no element lengths: a list of an opaque type stays the
            # bytes of the whole list (its elements joined by ",").
            return columns["value"].to_pylist()
        if self.kind == "LIST":
            rows, elements = self.list_elements()
            decoded = decode_column(self.cell_type, elements, state=self.name)
            out: list[list[Any]] = [[] for _ in range(len(self))]
            for row, element in zip(rows.tolist(), decoded):
                out[row].append(_unwrap(element, with_ttl))
            return out
        values = columns["value"]
        if self.kind != "MAP":
            return [_unwrap(v, with_ttl) for v in decode_column(self.cell_type, values, state=self.name)]
        # A null map value is its flag alone (RocksDB) or the flag and whatever the
        # serializer wrote for null (heap): only the others are decoded.
        nulls = columns["value_is_null"].to_numpy(zero_copy_only=False)
        present = np.flatnonzero(~nulls)
        decoded = decode_column(self.cell_type, values.take(pa.array(present)), state=self.name)
        by_row: list[Any] = [None] * len(values)
        for row, value in zip(present.tolist(), decoded):
            by_row[row] = _unwrap(value, with_ttl)
        return by_row

    def items(self, *, with_ttl: bool = False) -> Iterator[tuple[Any, ...]]:
        """Decoded entries: ``(key, value)``; ``(key, user_key, value)`` for MAP
        (one per map entry); the namespace follows the key when the state has
        one. ``with_ttl`` gives TTL cells as :class:`TtlValue`. A LIST value is
        a list, except for elements of an opaque type (Kryo...): Flink stores
        no element lengths, so such a value is the stored bytes of the whole
        list, elements joined by ``,``."""
        columns = self._columns
        parts = [decode_column(self.key_type, columns["key"], state=self.name)]
        if self.has_namespace:
            parts.append(decode_column(self.namespace_type, columns["namespace"], state=self.name))
        if self.user_key_type is not None:  # MAP state
            parts.append(decode_column(self.user_key_type, columns["user_key"], state=self.name))
        parts.append(self._decoded_values(with_ttl))
        return iter(zip(*parts))

    @cached_property
    def _index(self) -> dict[Any, Any]:
        index: dict[Any, Any] = {}
        for item in self.items():
            key, rest = item[0], item[1:]
            namespace = rest[0] if self.has_namespace else None
            rest = rest[1:] if self.has_namespace else rest
            slot = (freeze(key), freeze(namespace))
            if self.kind == "MAP":
                index.setdefault(slot, {})[freeze(rest[0])] = rest[1]
            else:
                index[slot] = rest[0]
        return index

    def get(self, key: Any, default: Any = None, *, namespace: Any = None) -> Any:
        """The state of ``key`` (in ``namespace``): a value, a list, or a dict for MAP. A
        namespaced state (a window's) needs ``namespace`` (as :meth:`items` gives it: a
        ``TimeWindow``, ``GLOBAL_WINDOW``), and only it takes one, as pyref's own views."""
        if (namespace is None) == self.has_namespace:
            # Without it a window state's get() would give the default for every key, unasked.
            raise InvalidArgumentError(
                f"{self.name} is kept per namespace ({self.namespace_type.describe()}): give namespace=..., e.g. "
                "pyref.flink.TimeWindow(start, end) or GLOBAL_WINDOW" if self.has_namespace
                else f"{self.name} has no namespace; namespace= is for a window's state", state=self.name)
        return self._index.get((freeze(key), freeze(namespace)), default)


def _unwrap(value: Any, with_ttl: bool) -> Any:
    return value.value if isinstance(value, TtlValue) and not with_ttl else value


def _expect(type_: FlinkType, kind: str, state: str) -> FlinkType:
    if type_.kind != kind:
        raise UnsupportedFormatError(f"expected a {kind} serializer, found {type_.describe()}", state=state)
    return type_


class FlinkTimerView(_KeyedRowsView):
    """The timers of one internal timer service in one time domain."""

    def __init__(self, service: str, domain: str, key_type: FlinkType, namespace_type: FlinkType,
                 rows: KeyedRows, prefix_bytes: int, max_parallelism: int) -> None:
        super().__init__(key_type, namespace_type, rows, prefix_bytes, max_parallelism)
        self.service = service
        self.domain = domain
        self.label = f"{domain} timers of {service}"

    @cached_property
    def _columns(self) -> dict[str, pa.Array]:
        return split_timer_keys(self._rows.keys, self._prefix, self.key_type, self.namespace_type, self.label)

    def to_arrow(self, raw: bool = False) -> pa.Table:
        """``subtask``, ``key_group``, ``key``, ``namespace`` (decoded, or with ``raw`` their
        bytes) and ``timestamp`` (int64 ms)."""
        if raw:
            return self._table(self._columns)
        stored = self._columns
        keys, namespaces, stamps = (list(c) for c in zip(*self.items())) if len(self) else ([], [], [])
        columns = [_column("key", keys, stored["key"], self.key_type)]
        if self.namespace_type.kind != "void-namespace":
            columns.append(_column("namespace", namespaces, stored["namespace"], self.namespace_type))
        columns.append((pa.field("timestamp", pa.int64()), pa.array(stamps, pa.int64())))
        return _decoded_table(self._leading(), columns)

    def items(self) -> Iterator[tuple[Any, ...]]:
        """Decoded ``(key, namespace, timestamp)`` of every timer."""
        columns = self._columns
        keys = decode_column(self.key_type, columns["key"])
        namespaces = decode_column(self.namespace_type, columns["namespace"])
        return iter(zip(keys, namespaces, columns["timestamp"].to_pylist()))
