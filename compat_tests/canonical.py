"""The canonical JSON dump of a savepoint (schema: compat_tests/README.md).

A canonical dump is what every implementation of the format must agree on
when it reads a savepoint: the decoded contents of every state, and which
list elements and keys every new subtask restores at some parallelisms. It is
language-neutral: 64-bit integers are decimal strings, bytes are lowercase
hex, float64 values are the 16 hex digits of their IEEE-754 bits, so that any
JSON library reproduces it exactly.

Two producers live here and must agree:

* :func:`dump_savepoint` reads a savepoint with pyref (the reader under test);
* :func:`expected_from_model` computes the dump from the values a generator
  wrote, without reading anything back (how the goldens' ``expected.json``
  are made).

:func:`canonical_text` is the byte-exact text form used to compare dumps.

Schema 2 (format 1.2) adds namespaces, TTL timestamps, timers, broadcast states,
coordinator state, the operator's uid and a last-row-wins ``values`` view per
keyed state; it is schema 1 plus members, and :func:`as_schema_1` drops them, so
a dump of the newest schema compares with the schema 1 expectation of an older
case. Both producers write schema 1 unless asked for 2, which keeps the generators
of the schema 1 corpora writing what they always wrote.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Newest version of the canonical dump schema (compat_tests/README.md). Bump it only
#: with a new schema; readers print the version they implement.
CANONICAL_VERSION = 2

#: The members schema 2 added, by the object that holds them (compat_tests/README.md).
SCHEMA_2_MEMBERS = {
    "operator": ("uid", "key_groups", "coordinator_state", "timer_services", "broadcast_states"),
    "keyed_state": ("namespace_serializer", "ttl", "values"),
    "entry": ("namespace", "ttl_timestamp"),
    "subtask": ("timer_services", "broadcast_states"),
    "serializer": ("symbols", "engine"),
}

#: Error categories a reader reports when it refuses a savepoint (README.md).
ERROR_CATEGORIES = (
    "unsupported-version",  # newer major format version
    "unsupported-feature",  # unknown required feature, codec, mode, kind, serializer or snapshot version
    "corrupt",  # anything else wrong with the bytes or the structure
    "not-found",  # no committed savepoint (no _manifest) at the path
)

MODE_NAMES = {1: "SPLIT_DISTRIBUTE", 2: "UNION", 3: "BROADCAST"}
KIND_NAMES = {1: "value", 2: "list", 3: "map", 4: "reducing", 5: "aggregating"}
DOMAIN_NAMES = {1: "event_time", 2: "processing_time"}
UPDATE_TYPES = {1: "on_create_and_write", 2: "on_read_and_write"}
VISIBILITIES = {1: "never_return_expired", 2: "return_expired_if_not_cleaned_up"}


# --------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------


def float64_json(value: float) -> str:
    """The 16 lowercase hex digits of the IEEE-754 bits, most significant first."""
    return struct.pack(">d", value).hex()


def _serializer_classes():
    from pyref import serializers as s

    return s


def json_from_value(serializer, value: Any) -> Any:
    """Canonical JSON of a Python value as the serializer encodes it (the writer's view)."""
    s = _serializer_classes()
    if isinstance(serializer, (s.Int32, s.Int8, s.Int16)):
        return int(value)
    if isinstance(serializer, s.Float32):  # before Float64, its base class
        return struct.pack(">f", value).hex()
    if isinstance(serializer, s.Char):
        return ord(value)
    if isinstance(serializer, s.Enum):
        return value.name if hasattr(value, "name") and not isinstance(value, str) else str(value)
    if isinstance(serializer, s.TimeWindow):
        start, end = value
        return [str(int(start)), str(int(end))]
    if isinstance(serializer, s.GlobalWindow):
        return {}
    if isinstance(serializer, s.Int64):
        return str(int(value))
    if isinstance(serializer, s.Float64):
        return float64_json(value)
    if isinstance(serializer, s.Boolean):
        return bool(value)
    if isinstance(serializer, s.String):
        return str(value)
    if isinstance(serializer, s.Bytes):
        return bytes(value).hex()
    if isinstance(serializer, s.Nullable):
        return None if value is None else json_from_value(serializer.inner, value)
    if isinstance(serializer, s.Tuple):
        values = [value[n] for n in serializer.names] if isinstance(value, dict) else list(value)
        return [json_from_value(f, v) for f, v in zip(serializer.fields, values)]
    if isinstance(serializer, s.ListOf):
        return [json_from_value(serializer.element, v) for v in value]
    if isinstance(serializer, s.MapOf):
        items = value.items() if isinstance(value, dict) else value
        return [[json_from_value(serializer.key, k), json_from_value(serializer.value, v)] for k, v in items]
    if isinstance(serializer, (s.Protobuf, s.Json)):
        # Stored bytes: protobuf as hex, json as its text.
        return json_from_bytes(serializer, serializer.encode(value))
    return serializer.encode(value).hex()  # user-defined: the encoding itself


def _corrupt(serializer, message: str):
    from pyref.errors import CorruptSavepointError

    return CorruptSavepointError(f"{serializer.serializer_id}: {message}")


def _framed(serializer, mv: memoryview, pos: int, end: int) -> tuple[int, int]:
    """Byte range of one framed value (spec/serializers.md §4) starting at ``pos``."""
    width = serializer.fixed_width
    if width is not None:
        if end - pos < width:
            raise _corrupt(serializer, f"truncated framed value at offset {pos}")
        return pos, pos + width
    if end - pos < 4:
        raise _corrupt(serializer, f"truncated length prefix at offset {pos}")
    (n,) = struct.unpack_from("<I", mv, pos)
    if n > end - pos - 4:
        raise _corrupt(serializer, f"length prefix {n} at offset {pos} exceeds the remaining bytes")
    return pos + 4, pos + 4 + n


def _walk(serializer, mv: memoryview, start: int, end: int) -> Any:
    s = _serializer_classes()
    if isinstance(serializer, s.Nullable):
        if mv[start] == 0:
            return None
        return _walk(serializer.inner, mv, start + 1, end)
    if isinstance(serializer, s.Tuple):
        out, pos = [], start
        for f in serializer.fields:
            a, b = _framed(f, mv, pos, end)
            out.append(_walk(f, mv, a, b))
            pos = b
        return out
    if isinstance(serializer, (s.ListOf, s.MapOf)):
        (count,) = struct.unpack_from("<I", mv, start)
        children = [serializer.element] if isinstance(serializer, s.ListOf) else [serializer.key, serializer.value]
        out, pos = [], start + 4
        for _ in range(count):
            item = []
            for child in children:
                a, b = _framed(child, mv, pos, end)
                item.append(_walk(child, mv, a, b))
                pos = b
            out.append(item[0] if len(item) == 1 else item)
        return out
    raw = bytes(mv[start:end])
    if isinstance(serializer, s.Protobuf):
        return raw.hex()
    if isinstance(serializer, s.Json):
        return raw.decode("utf-8")
    if isinstance(serializer, s.Float32):
        return raw[::-1].hex()  # the stored bits, NaN payloads included
    if isinstance(serializer, (s.Int32, s.Int64, s.Float64, s.Boolean, s.String, s.Bytes, s.Int8, s.Int16, s.Char,
                               s.Enum, s.TimeWindow, s.GlobalWindow)):
        return json_from_value(serializer, serializer.decode(raw))
    return raw.hex()  # opaque or user-defined serializer: its encoding


def json_from_bytes(serializer, data: bytes | memoryview) -> Any:
    """Canonical JSON of one stored encoding (the reader's view).

    The encoding is first decoded in full by the serializer, which validates
    it (spec/serializers.md); the JSON is then taken from the bytes, so that
    protobuf values are dumped exactly as stored.
    """
    mv = memoryview(bytes(data))
    serializer.decode(mv)
    return _walk(serializer, mv, 0, len(mv))


def snapshot_json(snapshot) -> dict:
    """A serializer snapshot as stored: id, version, nested, and the fields that are set."""
    out: dict[str, Any] = {"id": snapshot.serializer_id, "version": snapshot.version}
    if len(snapshot.nested):
        out["nested"] = [snapshot_json(n) for n in snapshot.nested]
    if len(snapshot.field_names):
        out["field_names"] = list(snapshot.field_names)
    if snapshot.HasField("protobuf"):
        out["protobuf_message"] = snapshot.protobuf.message_name
    if snapshot.custom_configuration:
        out["custom_configuration"] = snapshot.custom_configuration.hex()
    if len(snapshot.symbols):
        out["symbols"] = list(snapshot.symbols)
    if snapshot.HasField("engine"):
        out["engine"] = {"engine": snapshot.engine.engine, "class_name": snapshot.engine.class_name,
                         "snapshot": snapshot.engine.snapshot.hex()}
    return out


def ttl_json(config) -> dict:
    """A keyed state's TtlConfig (schema 2)."""
    return {"ttl_ms": str(config.ttl_ms), "update_type": UPDATE_TYPES[config.update_type],
            "visibility": VISIBILITIES[config.visibility]}


def as_schema_1(document: Any) -> Any:
    """A schema 2 dump without the members schema 2 added: what a schema 1 dump of the
    same savepoint is, for the savepoints schema 1 can describe (format 1.0 and 1.1)."""
    if not (isinstance(document, dict) and document.get("canonical_version") == 2):
        return document

    def serializer(s):
        if isinstance(s, dict):
            s = {k: v for k, v in s.items() if k not in SCHEMA_2_MEMBERS["serializer"]}
            if "nested" in s:
                s["nested"] = [serializer(n) for n in s["nested"]]
        return s

    def drop(obj: dict, kind: str) -> dict:
        return {k: v for k, v in obj.items() if k not in SCHEMA_2_MEMBERS[kind]}

    operators = []
    for op in document.get("operators", []):
        op = drop(op, "operator")
        op["key_serializer"] = serializer(op.get("key_serializer"))
        op["list_states"] = [{**ls, "element_serializer": serializer(ls["element_serializer"])}
                             for ls in op.get("list_states", [])]
        keyed = []
        for ks in op.get("keyed_states", []):
            ks = drop(ks, "keyed_state")
            for name in ("value_serializer", "user_key_serializer"):
                if name in ks:
                    ks[name] = serializer(ks[name])
            ks["entries"] = [drop(e, "entry") for e in ks.get("entries", [])]
            keyed.append(ks)
        op["keyed_states"] = keyed
        op["restore"] = [{**r, "subtasks": [drop(sub, "subtask") for sub in r["subtasks"]]}
                         for r in op.get("restore", [])]
        operators.append(op)
    return {**document, "canonical_version": 1, "operators": operators}


def _utf8(name: str) -> bytes:
    return name.encode("utf-8")


# --------------------------------------------------------------------------
# The document, from rows either producer computed
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One stored row of a keyed state, or one timer (``value`` is then its timestamp),
    with the encoded bytes that order and identify it and the JSON of each part."""

    key_group: int
    key: bytes
    namespace: bytes  # b"" in the void namespace
    user_key: bytes  # b"" unless MAP state
    key_json: Any
    namespace_json: Any
    user_key_json: Any
    value_json: Any
    ttl_json: Any = None

    @property
    def order(self) -> tuple:
        return self.key_group, self.key, self.namespace, self.user_key


@dataclass
class KeyedDoc:
    """What the dump says of one keyed state: its snapshots (as JSON) and its rows."""

    name: str
    kind: str
    value_serializer: dict
    rows: list[Row]
    user_key_serializer: dict | None = None
    namespace_serializer: dict | None = None
    ttl: dict | None = None


@dataclass
class TimerDoc:
    name: str
    domain: int
    rows: list[Row]
    namespace_serializer: dict | None = None


def _sorted_rows(rows: Iterable[Row]) -> list[Row]:
    """Rows by key group, then key, namespace and user key bytes; equal ones keep their stored order."""
    return sorted(rows, key=lambda r: r.order)


def _distinct_timers(rows: Iterable[Row]) -> list[Row]:
    """Timers are a set (spec/format.md §7.9): each distinct timer once, in key order, then by timestamp."""
    distinct = {(r.order, r.value_json): r for r in rows}
    return sorted(distinct.values(), key=lambda r: (r.order, int(r.value_json)))


def _last_rows(rows: list[Row]) -> list[Row]:
    """The row that wins for each identity (spec/format.md §7.1): the last of the sorted, stable run."""
    return [r for i, r in enumerate(rows) if i + 1 == len(rows) or rows[i + 1].order != r.order]


def _entry(state: KeyedDoc, row: Row) -> dict:
    entry = {"key_group": row.key_group, "key": row.key_json}
    if state.namespace_serializer is not None:
        entry["namespace"] = row.namespace_json
    if state.kind == "map":
        entry["user_key"] = row.user_key_json
    entry["value"] = row.value_json
    if state.ttl is not None:
        entry["ttl_timestamp"] = row.ttl_json
    return entry


def _keyed_json(state: KeyedDoc, version: int) -> dict:
    out = {"name": state.name, "kind": state.kind, "value_serializer": state.value_serializer}
    if state.user_key_serializer is not None:
        out["user_key_serializer"] = state.user_key_serializer
    rows = _sorted_rows(state.rows)
    out["entries"] = [_entry(state, r) for r in rows]
    if version >= 2:
        if state.namespace_serializer is not None:
            out["namespace_serializer"] = state.namespace_serializer
        if state.ttl is not None:
            out["ttl"] = state.ttl
        out["values"] = [_entry(state, r) for r in _last_rows(rows)]
    return out


def _timer_json(service: TimerDoc) -> dict:
    out = {"name": service.name, "domain": DOMAIN_NAMES[service.domain]}
    if service.namespace_serializer is not None:
        out["namespace_serializer"] = service.namespace_serializer
    out["timers"] = [{"key_group": r.key_group, "key": r.key_json,
                      **({"namespace": r.namespace_json} if service.namespace_serializer is not None else {}),
                      "timestamp": r.value_json} for r in _distinct_timers(service.rows)]
    return out


def _distinct_keys(rows: Iterable[Row]) -> list:
    """The distinct keys of sorted rows, in their order (keys compared by their bytes)."""
    out, last = [], None
    for row in rows:
        if (row.key_group, row.key) != last:
            out.append(row.key_json)
            last = (row.key_group, row.key)
    return out


def _timer_key(service) -> tuple:
    return _utf8(service.name), service.domain


def _subtask_json(index: int, first: int, last: int, lists: dict, keyed: dict, timers: dict, broadcast: dict,
                  version: int) -> dict:
    out = {"subtask": index, "key_groups": [first, last], "list_states": lists, "keyed_states": keyed}
    if version >= 2:
        out["timer_services"] = timers
        out["broadcast_states"] = broadcast
    return out


def _operator_json(operator_id: str, parallelism: int, max_parallelism: int, key_serializer: dict | None,
                   list_states: list, keyed: list[KeyedDoc], restore: list, version: int, *, uid: str = "",
                   writer_key_groups: bool = False, coordinator_state: bytes | None = None,
                   timers: Sequence[TimerDoc] = (), broadcast: list | None = None) -> dict:
    out: dict[str, Any] = {
        "operator_id": operator_id, "parallelism": parallelism, "max_parallelism": max_parallelism,
        "key_serializer": key_serializer, "list_states": list_states,
        "keyed_states": [_keyed_json(ks, version) for ks in sorted(keyed, key=lambda s: _utf8(s.name))],
        "restore": restore,
    }
    if version >= 2:
        out["uid"] = uid
        out["key_groups"] = "writer" if writer_key_groups else "hashed"
        out["coordinator_state"] = coordinator_state.hex() if coordinator_state is not None else None
        out["timer_services"] = [_timer_json(s) for s in sorted(timers, key=_timer_key)]
        out["broadcast_states"] = broadcast or []
    return out


def _document(format_version: str, parallelisms: Sequence[int], operators: list, version: int) -> dict:
    return {"canonical_version": version, "format_version": format_version, "parallelisms": list(parallelisms),
            "operators": operators}


# --------------------------------------------------------------------------
# Dump through pyref (the reader)
# --------------------------------------------------------------------------


def _read_list_values(view, ranges) -> list:
    out = []
    for column in view.read_encoded(ranges):
        for i in range(len(column)):
            out.append(json_from_bytes(view.serializer, column[i].as_py()))
    return out


def _ttl_list_json(element, cell: bytes) -> tuple[list, list]:
    """The values and timestamps of a LIST cell of TTL elements (spec/format.md §7.8)."""
    from pyref.serializers import ListOf
    from pyref.ttl import TtlValue

    ttl_element = TtlValue(element)
    ListOf.of_list_state(ttl_element).decode(cell)  # validates the whole cell first
    mv = memoryview(cell)
    (count,) = struct.unpack_from("<I", mv, 0)
    values, stamps, pos = [], [], 4
    for _ in range(count):
        a, b = _framed(ttl_element, mv, pos, len(mv))
        stamps.append(str(struct.unpack_from("<q", mv, a)[0]))
        values.append(_walk(element, mv, a + 8, b))
        pos = b
    return values, stamps


def _read_value(view, cell: bytes) -> tuple[Any, Any]:
    """(value JSON, TTL timestamp JSON or None) of one stored value cell of a keyed state."""
    from pyref.serializers import ListOf

    if view.ttl is None:
        return json_from_bytes(ListOf.of_list_state(view.value_serializer) if view.kind == "list" else view.value_serializer,
                               cell), None
    if view.kind == "list":
        return _ttl_list_json(view.value_serializer, cell)
    if len(cell) < 8:
        raise _corrupt(view.value_serializer, f"a TTL cell of {len(cell)} bytes has no timestamp")
    return json_from_bytes(view.value_serializer, cell[8:]), str(struct.unpack_from("<q", cell)[0])


def _read_keyed_rows(view, chunks) -> list[Row]:
    rows = []
    for group, columns in view.read_encoded(chunks):
        keys, cells = columns[0], columns[-1]
        namespaces = columns[1] if view.namespaced else None
        user_keys = columns[-2] if view.kind == "map" else None
        for i in range(len(keys)):
            kb = keys[i].as_py()
            nb = namespaces[i].as_py() if namespaces is not None else b""
            ub = user_keys[i].as_py() if user_keys is not None else b""
            value, stamp = _read_value(view, cells[i].as_py())
            rows.append(Row(group, kb, nb, ub, json_from_bytes(view.key_serializer, kb),
                            json_from_bytes(view.namespace_serializer, nb) if namespaces is not None else None,
                            json_from_bytes(view.user_key_serializer, ub) if user_keys is not None else None,
                            value, stamp))
    return rows


def _read_timer_rows(view, chunks) -> list[Row]:
    from pyref.serializers import Int64

    rows = []
    for group, columns in view.read_encoded(chunks):
        namespaces = columns[1] if view.namespace_serializer is not None else None
        for i in range(len(columns[0])):
            kb = columns[0][i].as_py()
            nb = namespaces[i].as_py() if namespaces is not None else b""
            rows.append(Row(group, kb, nb, b"", json_from_bytes(view.key_serializer, kb),
                            json_from_bytes(view.namespace_serializer, nb) if namespaces is not None else None,
                            None, str(Int64().decode(columns[-1][i].as_py()))))
    return rows


def _read_broadcast(view, ranges) -> list:
    keys, values = view.encoded_entries(ranges)  # refuses a repeated key (rule B5)
    return [[json_from_bytes(view.key_serializer, k.as_py()), json_from_bytes(view.value_serializer, v.as_py())]
            for k, v in zip(keys, values)]


def dump_savepoint(path: str | os.PathLike[str] | Any, parallelisms: Sequence[int], canonical_version: int = 1) -> dict:
    """Read the savepoint at ``path`` (or a ``pyref.io.SavepointIO``, such as a local
    directory confined to a store root) with pyref and return its canonical dump, of
    schema ``canonical_version`` (1, or 2 for format 1.2's additions)."""
    from pyref import Savepoint

    sp = Savepoint.open(path)
    # The dump is a read of the whole savepoint: serializers and every listed base are checked
    # even when no operator holds state to trigger it (spec/format.md §5.10).
    sp.store.check_before_reading()
    operators = []
    for op in sorted(sp.operators, key=lambda o: _utf8(o.operator_id)):
        list_views = {n: op.list_state(n) for n in op.list_state_names}
        keyed_views = {n: op.keyed_state(n) for n in op.keyed_state_names}
        services = op.timer_services
        broadcast_views = {n: op.broadcast_state(n) for n in op.broadcast_state_names}
        key_serializer = op.proto.key_serializer if op.proto.HasField("key_serializer") else None
        keyed = [KeyedDoc(v.name, v.kind, snapshot_json(v.proto.value_serializer), _read_keyed_rows(v, v.proto.chunks),
                          snapshot_json(v.proto.user_key_serializer) if v.kind == "map" else None,
                          snapshot_json(v.proto.namespace_serializer) if v.namespaced else None,
                          ttl_json(v.proto.ttl) if v.ttl is not None else None) for v in keyed_views.values()]
        timers = [TimerDoc(s.name, s.proto.domain, _read_timer_rows(s, s.proto.chunks),
                           snapshot_json(s.proto.namespace_serializer) if s.namespace_serializer else None)
                  for s in services]
        restore = []
        for p in parallelisms:
            if not 1 <= p <= op.max_parallelism:
                continue  # no operator runs at p < 1 or above its max parallelism: not part of the dump
            plan = sp.restore_plan({op.operator_id: p})
            subtasks = []
            for sub in plan.subtasks(op.operator_id):
                r = sub.key_group_range
                timer_keys: dict = {}
                for s in sorted(services, key=_timer_key):
                    rows = _distinct_timers(_read_timer_rows(s, s.chunks_in(r)))
                    timer_keys.setdefault(s.name, {})[DOMAIN_NAMES[s.proto.domain]] = _distinct_keys(rows)
                subtasks.append(_subtask_json(
                    sub.index, r.first, r.last,
                    {n: _read_list_values(list_views[n], sub.list_ranges(n)) for n in sorted(list_views, key=_utf8)},
                    {n: _distinct_keys(_sorted_rows(_read_keyed_rows(keyed_views[n], sub.keyed_chunks(n))))
                     for n in sorted(keyed_views, key=_utf8)},
                    timer_keys,
                    {n: _read_broadcast(broadcast_views[n], sub.broadcast_ranges(n))
                     for n in sorted(broadcast_views, key=_utf8)},
                    canonical_version))
            restore.append({"parallelism": p, "subtasks": subtasks})
        list_states = [{"name": n, "mode": MODE_NAMES[v.proto.mode],
                        "element_serializer": snapshot_json(v.proto.element_serializer),
                        "partitions": [_read_list_values(v, p.ranges) for p in v.proto.partitions]}
                       for n, v in sorted(list_views.items(), key=lambda kv: _utf8(kv[0]))]
        broadcast = [{"name": n, "key_serializer": snapshot_json(v.proto.key_serializer),
                      "value_serializer": snapshot_json(v.proto.value_serializer),
                      "partitions": [_read_broadcast(v, p.ranges) for p in v.proto.partitions]}
                     for n, v in sorted(broadcast_views.items(), key=lambda kv: _utf8(kv[0]))]
        operators.append(_operator_json(
            op.operator_id, op.parallelism, op.max_parallelism,
            snapshot_json(key_serializer) if key_serializer is not None else None, list_states, keyed, restore,
            canonical_version, uid=op.uid, writer_key_groups=op.writer_assigned_key_groups,
            coordinator_state=op.coordinator_state, timers=timers, broadcast=broadcast))
    return _document(str(sp.version), parallelisms, operators, canonical_version)


def error_category(exc: BaseException, path: str | os.PathLike[str] | None = None) -> str:
    """The conformance error category of a pyref error (compat_tests/README.md)."""
    from pyref.errors import CorruptSavepointError, SavepointNotFoundError, UnsupportedFormatError
    from pyref.manifest import FORMAT_MAJOR, MAGIC

    if isinstance(exc, SavepointNotFoundError):
        return "not-found"
    if isinstance(exc, UnsupportedFormatError):
        if path is not None:
            try:
                with open(os.path.join(os.fspath(path), "_manifest"), "rb") as f:
                    head = f.read(12)
                if head[:8] == MAGIC and len(head) == 12 and struct.unpack_from("<H", head, 8)[0] != FORMAT_MAJOR:
                    return "unsupported-version"
            except OSError:
                pass
        return "unsupported-feature"
    if isinstance(exc, CorruptSavepointError):
        return "corrupt"
    return "error"


# --------------------------------------------------------------------------
# Dump from a model (the writer's view)
# --------------------------------------------------------------------------


@dataclass
class ListModel:
    """A list state as written: the elements of every partition, in order."""

    name: str
    mode: int
    serializer: Any
    partitions: list[list[Any]]
    snapshot: Any = None  # stored snapshot when it is not serializer.snapshot()

    def snapshot_json(self) -> dict:
        return snapshot_json(self.snapshot if self.snapshot is not None else self.serializer.snapshot())


@dataclass
class KeyedModel:
    """A keyed state as written: (key, value) or (key, user_key, value) rows; format 1.2
    adds a namespace and a TTL timestamp per row (for LIST state, one per element), and
    the key group per row where the writer assigns them."""

    name: str
    kind: str  # value | list | map | reducing | aggregating
    value_serializer: Any
    rows: list[tuple]
    user_key_serializer: Any = None
    value_snapshot: Any = None
    namespace_serializer: Any = None
    namespaces: list | None = None
    ttl: Any = None  # pyref.ttl.TtlConfig
    ttl_timestamps: list | None = None
    key_groups: list[int] | None = None


@dataclass
class TimerModel:
    """A timer service as written: (key, timestamp) or (key, namespace, timestamp) timers."""

    name: str
    domain: int  # 1 event time, 2 processing time
    timers: list[tuple]
    namespace_serializer: Any = None
    key_groups: list[int] | None = None


@dataclass
class BroadcastModel:
    """A broadcast state as written: the (key, value) entries of every partition."""

    name: str
    key_serializer: Any
    value_serializer: Any
    partitions: list[list[tuple]]


@dataclass
class OperatorModel:
    operator_id: str
    parallelism: int
    max_parallelism: int
    key_serializer: Any = None
    lists: list[ListModel] = field(default_factory=list)
    keyed: list[KeyedModel] = field(default_factory=list)
    name: str = ""
    key_snapshot: Any = None
    timers: list[TimerModel] = field(default_factory=list)
    broadcast: list[BroadcastModel] = field(default_factory=list)
    coordinator_state: bytes | None = None
    uid: str = ""
    engine_operator_id: bytes = b""
    writer_key_groups: bool = False

    def key_type(self):
        from pyref.keys import key_type_of

        return key_type_of(self.key_snapshot if self.key_snapshot is not None else self.key_serializer.snapshot())

    def key_groups_of(self, keys: Sequence, given: Sequence[int] | None) -> list[int]:
        from pyref.key_groups import assign_to_key_group

        if self.writer_key_groups:
            return list(given)
        key_type = self.key_type()
        return [assign_to_key_group(k, self.max_parallelism, key_type) for k in keys]

    def key_snapshot_json(self) -> dict | None:
        if not (self.keyed or self.timers):
            return None
        return snapshot_json(self.key_snapshot if self.key_snapshot is not None else self.key_serializer.snapshot())


def _model_rows(op: OperatorModel, ks: KeyedModel) -> list[Row]:
    from pyref.serializers import ListOf

    value_serializer = ListOf.of_list_state(ks.value_serializer) if ks.kind == "list" else ks.value_serializer
    groups = op.key_groups_of([r[0] for r in ks.rows], ks.key_groups)
    rows = []
    for i, row in enumerate(ks.rows):
        key, value = row[0], row[-1]
        user_key = row[1] if ks.kind == "map" else None
        namespace = ks.namespaces[i] if ks.namespace_serializer is not None else None
        stamp = ks.ttl_timestamps[i] if ks.ttl is not None else None
        if ks.ttl is not None and ks.kind == "list":
            stamp = [str(s) for s in ([stamp] * len(value) if isinstance(stamp, int) else stamp)]
        elif stamp is not None:
            stamp = str(stamp)
        rows.append(Row(
            groups[i], op.key_serializer.encode(key),
            ks.namespace_serializer.encode(namespace) if ks.namespace_serializer is not None else b"",
            ks.user_key_serializer.encode(user_key) if ks.kind == "map" else b"",
            json_from_value(op.key_serializer, key),
            json_from_value(ks.namespace_serializer, namespace) if ks.namespace_serializer is not None else None,
            json_from_value(ks.user_key_serializer, user_key) if ks.kind == "map" else None,
            json_from_value(value_serializer, value), stamp))
    return rows


def _model_timer_rows(op: OperatorModel, tm: TimerModel) -> list[Row]:
    groups = op.key_groups_of([t[0] for t in tm.timers], tm.key_groups)
    rows = []
    for group, timer in zip(groups, tm.timers):
        key, timestamp = timer[0], timer[-1]
        namespace = timer[1] if tm.namespace_serializer is not None else None
        rows.append(Row(group, op.key_serializer.encode(key),
                        tm.namespace_serializer.encode(namespace) if tm.namespace_serializer is not None else b"",
                        b"", json_from_value(op.key_serializer, key),
                        json_from_value(tm.namespace_serializer, namespace) if tm.namespace_serializer else None,
                        None, str(timestamp)))
    return rows


def _model_entries(bm: BroadcastModel, entries) -> list:
    return [[json_from_value(bm.key_serializer, k), json_from_value(bm.value_serializer, v)] for k, v in entries]


def expected_from_model(operators: Iterable[OperatorModel], parallelisms: Sequence[int],
                        format_version: str, canonical_version: int = 1) -> dict:
    """The canonical dump of a savepoint holding exactly ``operators``, computed from the model."""
    from pyref.key_groups import key_group_range
    from pyref.redistribution import DistributionMode, redistribute

    out = []
    for op in sorted(operators, key=lambda o: _utf8(o.operator_id)):
        lists = sorted(op.lists, key=lambda s: _utf8(s.name))
        broadcast = sorted(op.broadcast, key=lambda s: _utf8(s.name))
        keyed = [KeyedDoc(ks.name, ks.kind, snapshot_json(ks.value_snapshot if ks.value_snapshot is not None
                                                          else ks.value_serializer.snapshot()),
                          _model_rows(op, ks),
                          snapshot_json(ks.user_key_serializer.snapshot()) if ks.kind == "map" else None,
                          snapshot_json(ks.namespace_serializer.snapshot()) if ks.namespace_serializer else None,
                          ttl_json(ks.ttl.to_proto()) if ks.ttl is not None else None) for ks in op.keyed]
        timers = [TimerDoc(tm.name, tm.domain, _model_timer_rows(op, tm),
                           snapshot_json(tm.namespace_serializer.snapshot()) if tm.namespace_serializer else None)
                  for tm in op.timers]
        restore = []
        for p in parallelisms:
            if not 1 <= p <= op.max_parallelism:
                continue
            modes = {ls.name: (DistributionMode(ls.mode), [len(x) for x in ls.partitions]) for ls in lists}
            modes.update({bm.name: (DistributionMode.BROADCAST, [len(x) for x in bm.partitions]) for bm in broadcast})
            slices = redistribute(modes, op.parallelism, p)
            subtasks = []
            for i in range(p):
                r = key_group_range(op.max_parallelism, p, i)

                def own(rows: list[Row]) -> list[Row]:
                    return [row for row in rows if r.first <= row.key_group <= r.last]

                timer_keys: dict = {}
                for t in sorted(timers, key=_timer_key):
                    timer_keys.setdefault(t.name, {})[DOMAIN_NAMES[t.domain]] = _distinct_keys(
                        _distinct_timers(own(t.rows)))
                subtasks.append(_subtask_json(
                    i, r.first, r.last,
                    {ls.name: [json_from_value(ls.serializer, v) for sl in slices[ls.name][i]
                               for v in ls.partitions[sl.partition][sl.first:sl.first + sl.count]] for ls in lists},
                    {ks.name: _distinct_keys(_sorted_rows(own(ks.rows))) for ks in sorted(keyed,
                                                                                          key=lambda s: _utf8(s.name))},
                    timer_keys,
                    {bm.name: _model_entries(bm, [e for sl in slices[bm.name][i]
                                                  for e in bm.partitions[sl.partition][sl.first:sl.first + sl.count]])
                     for bm in broadcast},
                    canonical_version))
            restore.append({"parallelism": p, "subtasks": subtasks})
        list_states = [{"name": ls.name, "mode": MODE_NAMES[int(ls.mode)], "element_serializer": ls.snapshot_json(),
                        "partitions": [[json_from_value(ls.serializer, v) for v in part] for part in ls.partitions]}
                       for ls in lists]
        broadcast_json = [{"name": bm.name, "key_serializer": snapshot_json(bm.key_serializer.snapshot()),
                           "value_serializer": snapshot_json(bm.value_serializer.snapshot()),
                           "partitions": [_model_entries(bm, part) for part in bm.partitions]} for bm in broadcast]
        out.append(_operator_json(op.operator_id, op.parallelism, op.max_parallelism, op.key_snapshot_json(),
                                  list_states, keyed, restore, canonical_version, uid=op.uid,
                                  writer_key_groups=op.writer_key_groups, coordinator_state=op.coordinator_state,
                                  timers=timers, broadcast=broadcast_json))
    return _document(format_version, parallelisms, out, canonical_version)


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------


def canonical_text(document: Any) -> str:
    """The text two dumps are compared by: sorted keys, no insignificant whitespace, UTF-8."""
    return json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def first_difference(expected: Any, actual: Any, path: str = "$") -> str | None:
    """A JSON path and the two values at the first place the documents differ, or None."""
    if type(expected) is not type(actual):
        return f"{path}: expected {_short(expected)}, got {_short(actual)}"
    if isinstance(expected, dict):
        for k in sorted(set(expected) | set(actual)):
            if k not in actual:
                return f"{path}.{k}: missing"
            if k not in expected:
                return f"{path}.{k}: unexpected member"
            d = first_difference(expected[k], actual[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(expected, list):
        for i, (e, a) in enumerate(zip(expected, actual)):
            d = first_difference(e, a, f"{path}[{i}]")
            if d:
                return d
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, got {len(actual)}"
        return None
    if expected != actual:
        return f"{path}: expected {_short(expected)}, got {_short(actual)}"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."
