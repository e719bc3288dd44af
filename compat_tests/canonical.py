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
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Version of the canonical dump schema (compat_tests/README.md). Bump it only
#: with a new schema; readers print the version they implement.
CANONICAL_VERSION = 1

#: Error categories a reader reports when it refuses a savepoint (README.md).
ERROR_CATEGORIES = (
    "unsupported-version",  # newer major format version
    "unsupported-feature",  # unknown required feature, codec, mode, kind, serializer or snapshot version
    "corrupt",  # anything else wrong with the bytes or the structure
    "not-found",  # no committed savepoint (no _manifest) at the path
)

MODE_NAMES = {1: "SPLIT_DISTRIBUTE", 2: "UNION", 3: "BROADCAST"}
KIND_NAMES = {1: "value", 2: "list", 3: "map"}


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
    if isinstance(serializer, s.Int32):
        return int(value)
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
    if isinstance(serializer, (s.Int32, s.Int64, s.Float64, s.Boolean, s.String, s.Bytes)):
        return json_from_value(serializer, serializer.decode(raw))
    return raw.hex()  # user-defined serializer: its encoding


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
    return out


def _utf8(name: str) -> bytes:
    return name.encode("utf-8")


# --------------------------------------------------------------------------
# Dump through pyref (the reader)
# --------------------------------------------------------------------------


def _read_list_values(view, ranges) -> list:
    out = []
    for column in view.read_encoded(ranges):
        for i in range(len(column)):
            out.append(json_from_bytes(view.serializer, column[i].as_py()))
    return out


def _keyed_rows(view, chunks) -> list[tuple[int, bytes, bytes, Any, Any, Any]]:
    """(key group, key bytes, user-key bytes, key json, user-key json, value json), canonically ordered."""
    from pyref.serializers import ListOf

    value_serializer = ListOf(view.value_serializer) if view.kind == "list" else view.value_serializer
    rows = []
    for group, columns in view.read_encoded(chunks):
        keys, values = columns[0], columns[-1]
        user_keys = columns[1] if view.kind == "map" else None
        for i in range(len(keys)):
            kb = keys[i].as_py()
            ub = user_keys[i].as_py() if user_keys is not None else b""
            rows.append((group, kb, ub, json_from_bytes(view.key_serializer, kb),
                         json_from_bytes(view.user_key_serializer, ub) if user_keys is not None else None,
                         json_from_bytes(value_serializer, values[i].as_py())))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))  # stable: equal keys keep their stored order
    return rows


def _entry(kind: str, row) -> dict:
    entry = {"key_group": row[0], "key": row[3]}
    if kind == "map":
        entry["user_key"] = row[4]
    entry["value"] = row[5]
    return entry


def _distinct_keys(rows) -> list:
    out, last = [], None
    for row in rows:
        if (row[0], row[1]) != last:
            out.append(row[3])
            last = (row[0], row[1])
    return out


def dump_savepoint(path: str | os.PathLike[str], parallelisms: Sequence[int]) -> dict:
    """Read the savepoint at ``path`` with pyref and return its canonical dump."""
    from pyref import Savepoint

    sp = Savepoint.open(path)
    operators = []
    for op in sorted(sp.operators, key=lambda o: _utf8(o.operator_id)):
        list_views = {n: op.list_state(n) for n in op.list_state_names}
        keyed_views = {n: op.keyed_state(n) for n in op.keyed_state_names}
        key_serializer = op.proto.key_serializer if op.proto.HasField("key_serializer") else None
        entry: dict[str, Any] = {
            "operator_id": op.operator_id,
            "parallelism": op.parallelism,
            "max_parallelism": op.max_parallelism,
            "key_serializer": snapshot_json(key_serializer) if key_serializer is not None else None,
            "list_states": [],
            "keyed_states": [],
            "restore": [],
        }
        for name in sorted(list_views, key=_utf8):
            v = list_views[name]
            entry["list_states"].append({
                "name": name,
                "mode": MODE_NAMES[v.proto.mode],
                "element_serializer": snapshot_json(v.proto.element_serializer),
                "partitions": [_read_list_values(v, p.ranges) for p in v.proto.partitions],
            })
        for name in sorted(keyed_views, key=_utf8):
            v = keyed_views[name]
            state = {"name": name, "kind": v.kind, "value_serializer": snapshot_json(v.proto.value_serializer)}
            if v.kind == "map":
                state["user_key_serializer"] = snapshot_json(v.proto.user_key_serializer)
            state["entries"] = [_entry(v.kind, r) for r in _keyed_rows(v, v.proto.chunks)]
            entry["keyed_states"].append(state)
        for p in parallelisms:
            if p > op.max_parallelism:
                continue  # an operator cannot run above its max parallelism: not part of the dump
            plan = sp.restore_plan({op.operator_id: p})
            subtasks = []
            for sub in plan.subtasks(op.operator_id):
                r = sub.key_group_range
                subtasks.append({
                    "subtask": sub.index,
                    "key_groups": [r.first, r.last],
                    "list_states": {n: _read_list_values(list_views[n], sub.list_ranges(n))
                                    for n in sorted(list_views, key=_utf8)},
                    "keyed_states": {n: _distinct_keys(_keyed_rows(keyed_views[n], sub.keyed_chunks(n)))
                                     for n in sorted(keyed_views, key=_utf8)},
                })
            entry["restore"].append({"parallelism": p, "subtasks": subtasks})
        operators.append(entry)
    return {
        "canonical_version": CANONICAL_VERSION,
        "format_version": str(sp.version),
        "parallelisms": list(parallelisms),
        "operators": operators,
    }


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
    """A keyed state as written: (key, value) or (key, user_key, value) rows."""

    name: str
    kind: str  # value | list | map
    value_serializer: Any
    rows: list[tuple]
    user_key_serializer: Any = None
    value_snapshot: Any = None


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

    def key_type(self):
        from pyref.keys import key_type_of

        return key_type_of(self.key_snapshot if self.key_snapshot is not None else self.key_serializer.snapshot())


def _model_rows(op: OperatorModel, ks: KeyedModel):
    from pyref.key_groups import assign_to_key_group
    from pyref.serializers import ListOf

    key_type = op.key_type()
    value_serializer = ListOf(ks.value_serializer) if ks.kind == "list" else ks.value_serializer
    rows = []
    for row in ks.rows:
        key, value = row[0], row[-1]
        user_key = row[1] if ks.kind == "map" else None
        rows.append((
            assign_to_key_group(key, op.max_parallelism, key_type),
            op.key_serializer.encode(key),
            ks.user_key_serializer.encode(user_key) if ks.kind == "map" else b"",
            json_from_value(op.key_serializer, key),
            json_from_value(ks.user_key_serializer, user_key) if ks.kind == "map" else None,
            json_from_value(value_serializer, value),
        ))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return rows


def expected_from_model(operators: Iterable[OperatorModel], parallelisms: Sequence[int],
                        format_version: str) -> dict:
    """The canonical dump of a savepoint holding exactly ``operators``, computed from the model."""
    from pyref.key_groups import key_group_range
    from pyref.redistribution import DistributionMode, redistribute

    out = []
    for op in sorted(operators, key=lambda o: _utf8(o.operator_id)):
        lists = sorted(op.lists, key=lambda s: _utf8(s.name))
        keyed = sorted(op.keyed, key=lambda s: _utf8(s.name))
        rows = {ks.name: _model_rows(op, ks) for ks in keyed}
        entry: dict[str, Any] = {
            "operator_id": op.operator_id,
            "parallelism": op.parallelism,
            "max_parallelism": op.max_parallelism,
            "key_serializer": (snapshot_json(op.key_snapshot if op.key_snapshot is not None
                                             else op.key_serializer.snapshot()) if op.keyed else None),
            "list_states": [{
                "name": ls.name,
                "mode": MODE_NAMES[int(ls.mode)],
                "element_serializer": ls.snapshot_json(),
                "partitions": [[json_from_value(ls.serializer, v) for v in part] for part in ls.partitions],
            } for ls in lists],
            "keyed_states": [],
            "restore": [],
        }
        for ks in keyed:
            state = {"name": ks.name, "kind": ks.kind,
                     "value_serializer": snapshot_json(ks.value_snapshot if ks.value_snapshot is not None
                                                       else ks.value_serializer.snapshot())}
            if ks.kind == "map":
                state["user_key_serializer"] = snapshot_json(ks.user_key_serializer.snapshot())
            state["entries"] = [_entry(ks.kind, r) for r in rows[ks.name]]
            entry["keyed_states"].append(state)
        for p in parallelisms:
            if p > op.max_parallelism:
                continue
            slices = redistribute({ls.name: (DistributionMode(ls.mode), [len(x) for x in ls.partitions])
                                   for ls in lists}, op.parallelism, p)
            subtasks = []
            for i in range(p):
                r = key_group_range(op.max_parallelism, p, i)
                subtasks.append({
                    "subtask": i,
                    "key_groups": [r.first, r.last],
                    "list_states": {ls.name: [json_from_value(ls.serializer, v)
                                              for sl in slices[ls.name][i]
                                              for v in ls.partitions[sl.partition][sl.first:sl.first + sl.count]]
                                    for ls in lists},
                    "keyed_states": {ks.name: _distinct_keys([row for row in rows[ks.name]
                                                              if r.first <= row[0] <= r.last])
                                     for ks in keyed},
                })
            entry["restore"].append({"parallelism": p, "subtasks": subtasks})
        out.append(entry)
    return {
        "canonical_version": CANONICAL_VERSION,
        "format_version": format_version,
        "parallelisms": list(parallelisms),
        "operators": out,
    }


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
