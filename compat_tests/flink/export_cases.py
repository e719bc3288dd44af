"""What a real Flink job should read from a savepoint pyref exported: the job spec that
restores it and the truth (truth.json's schema, corpus/README.md) of what it holds.

:func:`write_export_case` writes the pyref savepoint the export tests use: the seeds'
scenario (offsets, URL counts, windowed counts and their timers) and, beside it, every
keyed state kind with and without TTL, String / Long / Tuple2 keys, event- and
processing-time timers, a value state of every type the default mapping writes, and
SPLIT_DISTRIBUTE, UNION and broadcast operator state.

:func:`expected_truth` derives, from any pyref savepoint, the truth of its export at a
parallelism: every value as the restore job's dump writes it (Json.java), each keyed
row with its key group and the subtask that owns it, each list and broadcast state as
the export distributed it. :func:`job_spec` gives the job that restores it.
"""

from __future__ import annotations

import copy
import math
import os
from collections import Counter

from pyref import Savepoint, TtlConfig
from pyref.flink.writer.operator_state import OperatorStateExport
from pyref.redistribution import DistributionMode
from pyref.serializers import (
    Boolean,
    Bytes,
    Char,
    Float32,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    ListOf,
    MapOf,
    Nullable,
    Serializer,
    String,
    Tuple,
    Window,
)
from pyref.testing import add_seeds
from pyref.writer import SavepointWriter

#: Reduce / aggregate functions of the restore job (Functions.java) by (operator, state).
FUNCTIONS = {("keyed-kinds", "sum"): "sum", ("keyed-kinds", "count-sum"): "count-sum"}
#: Last-access time of every TTL value: recent, so that no restore expires it.
TTL_STAMP = 1_735_689_600_000
TTL = TtlConfig(30 * 24 * 3600 * 1000)
#: Processing-time timers a day in year 2100: they never fire while a test runs.
FAR_FUTURE = 4_102_444_800_000
KEYS = [f"user-{i}" for i in range(24)] + ["é-ü", "ключ", ""]


def _keyed_kinds(w: SavepointWriter) -> None:
    op = w.add_operator("keyed-kinds", parallelism=2, key_serializer=String())
    keys = KEYS
    op.keyed_state("count", Int64()).add(keys, [i * 10 for i in range(len(keys))])
    op.keyed_state("history", String(), kind="list").add(
        keys, [[f"h{j}-{key}" for j in range(i % 4)] for i, key in enumerate(keys)])
    buckets = op.keyed_state("buckets", Nullable(Int64()), kind="map", user_key_serializer=String())
    entries = [(key, f"b{j}", None if (i + j) % 5 == 0 else i * j) for i, key in enumerate(keys) for j in range(i % 3)]
    buckets.add([k for k, _, _ in entries], [v for _, _, v in entries], [u for _, u, _ in entries])
    op.keyed_state("sum", Int64(), kind="reducing").add(keys, [2**40 + i for i in range(len(keys))])
    op.keyed_state("count-sum", Tuple(Int64(), Int64()), kind="aggregating").add(
        keys, [(i, i * 7) for i in range(len(keys))])
    op.keyed_state("ttl-last", String(), ttl=TTL).add(keys, [f"last-{k}" for k in keys],
                                                        ttl_timestamps=[TTL_STAMP + i for i in range(len(keys))])
    nums = [[i, -i, 2**53 + i][: 1 + i % 3] for i in range(len(keys))]
    op.keyed_state("ttl-nums", Int64(), kind="list", ttl=TTL).add(
        keys, nums, ttl_timestamps=[[TTL_STAMP - j for j in range(len(n))] for n in nums])
    tags = [(key, i % 4, f"tag{i}") for i, key in enumerate(keys)]
    op.keyed_state("ttl-tags", String(), kind="map", user_key_serializer=Int32(), ttl=TTL).add(
        [k for k, _, _ in tags], [v for _, _, v in tags], [u for _, u, _ in tags],
        ttl_timestamps=[TTL_STAMP + 5] * len(tags))
    op.timer_service("user-timers", "event_time").add(keys[:10], [1000 + i for i in range(10)])
    op.timer_service("user-timers", "processing_time").add(keys[5:15], [FAR_FUTURE + i for i in range(10)])
    longs = w.add_operator("long-keys", parallelism=2, key_serializer=Int64())
    long_keys = [-(2**62), -1, 0, 1, 2**53 + 1, 2**62] + list(range(100, 120))
    longs.keyed_state("count", Int64()).add(long_keys, list(range(len(long_keys))))
    pairs = w.add_operator("tuple-keys", parallelism=2, key_serializer=Tuple(String(), Int32()))
    pair_keys = [(key, i) for i, key in enumerate(KEYS)]
    pairs.keyed_state("count", Int64()).add(pair_keys, [i * 3 for i in range(len(pair_keys))])


#: One value state per type the default mapping writes: (pyref serializer, values).
TYPES = {
    "boolean": (Boolean(), [True, False]),
    "byte": (Int8(), [-128, 127]),
    "short": (Int16(), [-32768, 300]),
    "int": (Int32(), [-(2**31), 7]),
    "long": (Int64(), [2**63 - 1, -(2**63)]),
    "float": (Float32(), [1.5, -0.0]),
    "double": (Float64(), [math.pi, float("inf")]),
    "char": (Char(), ["é", "x"]),
    "string": (String(), ["😀 astral", "plain"]),
    "bytes": (Bytes(), [b"\x00\xff", b""]),
    "long-list": (ListOf(Int64()), [[1, 2, 3], []]),
    "string-map": (MapOf(String(), Nullable(Int64())), [{"a": 1, "b": None}, {}]),
    "triple": (Tuple(Int64(), String(), Float64()), [(1, "one", 1.0), (-2, "", -2.5)]),
}


def _types(w: SavepointWriter) -> None:
    op = w.add_operator("types", parallelism=2, key_serializer=String())
    for name, (serializer, values) in TYPES.items():
        op.keyed_state(name, serializer).add([f"k{i}" for i in range(len(values))], values)


def _list_states(w: SavepointWriter) -> None:
    op = w.add_operator("list-states", parallelism=3)
    names = op.list_state("names", String(), DistributionMode.SPLIT_DISTRIBUTE)
    for subtask, count in enumerate((5, 0, 3)):
        names.add(subtask, [f"name-{subtask}-{i}" for i in range(count)])
    union = op.list_state("union-offsets", Int64(), DistributionMode.UNION)
    for subtask in range(3):
        union.add(subtask, [1000 * subtask + i for i in range(subtask + 1)])
    union_pairs = op.list_state("union-pairs", Tuple(String(), Int64()), DistributionMode.UNION)
    union_pairs.add(1, [("a", 1), ("b", 2)])
    op.broadcast_state("op-broadcast", String(), Int64()).add_all([f"rule-{i}" for i in range(6)], list(range(6)))


def write_export_case(path: str | os.PathLike[str]) -> None:
    """The pyref savepoint of the export tests (see the module's docstring)."""
    with SavepointWriter(os.fspath(path)) as w:
        add_seeds(w, windowed=True)
        _keyed_kinds(w)
        _types(w)
        _list_states(w)


# -- the restore job and what it should read ----------------------------------------------

_TYPE_NAMES = {"boolean": "Boolean", "int8": "Byte", "int16": "Short", "int32": "Integer", "int64": "Long",
               "float32": "Float", "float64": "Double", "char": "Character", "string": "String", "bytes": "byte[]"}
_NAMESPACES = {None: "void", "time-window": "window", "global-window": "global"}
_TTL_NAMES = {"on_create_and_write": "OnCreateAndWrite", "on_read_and_write": "OnReadAndWrite",
              "never_return_expired": "NeverReturnExpired",
              "return_expired_if_not_cleaned_up": "ReturnExpiredIfNotCleanedUp"}


def type_name(serializer: Serializer) -> str:
    """The restore job's name (Types.java) of the Flink type the default mapping gives."""
    sid = serializer.serializer_id
    if sid in _TYPE_NAMES:
        return _TYPE_NAMES[sid]
    if isinstance(serializer, Nullable):
        return type_name(serializer.inner)
    if isinstance(serializer, ListOf):
        return f"List<{type_name(serializer.element)}>"
    if isinstance(serializer, MapOf):
        return f"Map<{type_name(serializer.key)},{type_name(serializer.value)}>"
    if isinstance(serializer, Tuple):
        return f"Tuple{len(serializer.fields)}<{','.join(type_name(f) for f in serializer.fields)}>"
    raise ValueError(f"no restore-job type for {serializer!r}")


def _long(v: int):
    # Json.java writes a long as a number when Math.abs(v) < 2^53, which also holds for
    # Long.MIN_VALUE (Math.abs overflows to it): the corpus quirk, tolerated as written.
    return v if abs(v) < 2**53 or v == -(2**63) else str(v)


def json_value(serializer: Serializer, value):
    """``value`` as the restore job's dump writes it (Json.java)."""
    sid = serializer.serializer_id
    if value is None:
        return None
    if sid == "int64":
        return _long(value)
    if sid in ("float32", "float64"):
        return value if math.isfinite(value) else ("NaN" if math.isnan(value) else
                                                   "Infinity" if value > 0 else "-Infinity")
    if sid == "bytes":
        return value.hex()
    if isinstance(serializer, Nullable):
        return json_value(serializer.inner, value)
    if isinstance(serializer, ListOf):
        return [json_value(serializer.element, v) for v in value]
    if isinstance(serializer, MapOf):
        return _pairs([(json_value(serializer.key, k), json_value(serializer.value, v)) for k, v in value.items()])
    if isinstance(serializer, Tuple):
        return [json_value(f, v) for f, v in zip(serializer.fields, value)]
    if isinstance(value, Window):
        return {"start": _long(value.start), "end": _long(value.end)}
    return value


def _text(value) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _pairs(pairs: list) -> list:
    return [list(p) for p in sorted(pairs, key=lambda p: _text(p[0]))]


def _namespace(view) -> str:
    serializer = view.namespace_serializer
    return _NAMESPACES[serializer.serializer_id if serializer is not None else None]


def expected_truth(path: str | os.PathLike[str], parallelism: int | None = None) -> dict:
    """What the export of the pyref savepoint at ``path`` at ``parallelism`` (None: each
    operator's own) holds, in truth.json's schema."""
    sp = Savepoint.open(path)
    operators = {}
    for op in sp.operators:
        p = parallelism or op.parallelism
        uid = op.uid or op.operator_id
        key_type = type_name(op.key_serializer) if op.key_serializer is not None else None
        operators[uid] = {"uid": uid, "parallelism": p, "max_parallelism": op.max_parallelism, "key_type": key_type,
                          "operator_state": _operator_state(op, p), "keyed_state": _keyed_state(op, p),
                          "timer_services": {v.name: {"namespace": _namespace(v)} for v in op.timer_services},
                          "timers": _timers(op, p)}
    return {"schema": "pyref-flink-truth/1", "operators": operators}


def _operator_state(op, parallelism: int) -> dict:
    export = OperatorStateExport(op, parallelism)  # the distribution does not depend on the release
    out = {}
    for view, mode, _, _ in export.lists:
        subtasks = []
        for i in range(parallelism):
            ranges = export._ranges(view, mode, i)
            subtasks.append([json_value(view.serializer, v) for v in view.iter_ranges(ranges)])
        out[view.name] = {"mode": mode.name, "type": type_name(view.serializer), "subtasks": subtasks}
    for view, _, _, _ in export.broadcasts:
        subtasks = [_pairs([(json_value(view.key_serializer, k), json_value(view.value_serializer, v))
                            for k, v in view.map_of(export._plan[view.name][i]).items()]) for i in range(parallelism)]
        out[view.name] = {"mode": "BROADCAST", "key_type": type_name(view.key_serializer),
                          "type": type_name(view.value_serializer), "subtasks": subtasks}
    return out


def _keyed_state(op, parallelism: int) -> dict:
    out = {}
    for name in op.keyed_state_names:
        view = op.keyed_state(name)
        state = {"kind": view.kind, "type": type_name(view.value_serializer), "namespace": _namespace(view),
                 "ttl": None if view.ttl is None else {"ttl_ms": view.ttl.ttl_ms,
                                                      "update_type": _TTL_NAMES[view.ttl.update_type],
                                                      "visibility": _TTL_NAMES[view.ttl.visibility]}}
        if view.user_key_serializer is not None:
            state["user_key_type"] = type_name(view.user_key_serializer)
        if (op.operator_id, name) in FUNCTIONS:
            state["function"] = FUNCTIONS[op.operator_id, name]
        state["entries"] = _entries(op, view, parallelism)
        out[name] = state
    return out


def _entries(op, view, parallelism: int) -> list[dict]:
    grouped: dict[tuple, dict] = {}
    for row in _decoded_rows(view):
        group, key, namespace, user_key, value, stamp = row
        slot = (_text(json_value(op.key_serializer, key)), _text(json_value(view.namespace_serializer, namespace)
                                                                 if view.namespaced else None))
        entry = grouped.setdefault(slot, {"key": json_value(op.key_serializer, key),
                                          "namespace": json_value(view.namespace_serializer, namespace)
                                          if view.namespaced else None,
                                          "key_group": group, "subtask": group * parallelism // view.max_parallelism})
        if view.kind == "map":
            entry.setdefault("_map", {})[_text(json_value(view.user_key_serializer, user_key))] = (
                json_value(view.user_key_serializer, user_key), json_value(view.value_serializer, value), stamp)
        elif view.kind == "list":
            entry["value"] = [json_value(view.value_serializer, v) for v in value]
            if view.ttl is not None:
                entry["ttl_timestamps"] = [_long(s) for s in stamp]
        else:
            entry["value"] = json_value(view.value_serializer, value)
            if view.ttl is not None:
                entry["ttl_timestamp"] = _long(stamp)
    entries = []
    for entry in grouped.values():
        if "_map" in entry:
            by_user_key = entry.pop("_map")
            rows = [by_user_key[k] for k in sorted(by_user_key)]
            entry["value"] = [[k, v] for k, v, _ in rows]
            if view.ttl is not None:
                entry["ttl_timestamps"] = [_long(s) for _, _, s in rows]
        if view.kind == "list" and not entry["value"]:
            continue  # Flink keeps no empty list
        entries.append(entry)
    return entries


def _decoded_rows(view):
    """(key group, key, namespace, user key, value, TTL stamp) of every row, in state order."""
    for chunk in view.proto.chunks:
        for row in view.iter_chunks([chunk], with_ttl=view.ttl is not None):
            row = list(row)
            key = row.pop(0)
            namespace = row.pop(0) if view.namespaced else None
            user_key = row.pop(0) if view.kind == "map" else None
            value = row.pop(0)
            stamp = row.pop(0) if view.ttl is not None else None
            yield chunk.key_group, key, namespace, user_key, value, stamp


def _timers(op, parallelism: int) -> list[dict]:
    out = []
    for view in op.timer_services:
        for chunk in view.proto.chunks:
            for row in view.iter_chunks([chunk]):
                key, *namespace, timestamp = row
                out.append({"service": view.name, "domain": view.domain, "key": json_value(op.key_serializer, key),
                            "namespace": json_value(view.namespace_serializer, namespace[0]) if namespace else None,
                            "timestamp": _long(timestamp), "key_group": chunk.key_group,
                            "subtask": chunk.key_group * parallelism // op.max_parallelism})
    return out


def job_spec(truth: dict) -> dict:
    """The restore job of a truth: its operators at the restore's parallelism."""
    from compat_tests.flink.harness import job_spec_from_truth

    return job_spec_from_truth(truth, own_parallelism=False)


# -- what pyref's own Flink reader reads from the export, as a restore job would dump it ----


def _reader_json(value):
    """A value the Flink reader decoded, as Json.java writes it."""
    from pyref.flink import GLOBAL_WINDOW, TimeWindow

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return _long(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else ("NaN" if math.isnan(value) else
                                                   "Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, TimeWindow):
        return {"start": _long(value.start), "end": _long(value.end)}
    if value is GLOBAL_WINDOW:
        return "global"
    if isinstance(value, dict):
        return _pairs([(_reader_json(k), _reader_json(v)) for k, v in value.items()])
    return [_reader_json(v) for v in value]


def _reader_keyed(op, name: str) -> list[dict]:
    from pyref.flink import TtlValue

    view = op.keyed_state(name)
    table = view.to_arrow(raw=True)
    places = zip(table.column("subtask").to_pylist(), table.column("key_group").to_pylist())
    entries: dict[tuple, dict] = {}
    for (subtask, group), item in zip(places, view.items(with_ttl=True)):
        key, *rest = item
        namespace = rest.pop(0) if view.has_namespace else None
        entry = entries.setdefault((subtask, _text(_reader_json(key)), _text(_reader_json(namespace))), {
            "key": _reader_json(key), "namespace": _reader_json(namespace), "key_group": group, "subtask": subtask})
        if view.kind == "MAP":
            user_key, value = rest
            entry.setdefault("_map", []).append((_reader_json(user_key), value))
            continue
        value = rest[0]
        if view.ttl and view.kind == "LIST":
            entry["value"] = [_reader_json(v.value) for v in value]
            entry["ttl_timestamps"] = [_long(v.timestamp) for v in value]
        elif view.ttl:
            entry["value"], entry["ttl_timestamp"] = _reader_json(value.value), _long(value.timestamp)
        else:
            entry["value"] = _reader_json(value)
    for entry in entries.values():
        if "_map" in entry:
            pairs = sorted(entry.pop("_map"), key=lambda p: _text(p[0]))
            unwrap = [(k, v.value if isinstance(v, TtlValue) else v) for k, v in pairs]
            entry["value"] = [[k, _reader_json(v)] for k, v in unwrap]
            if view.ttl:
                entry["ttl_timestamps"] = [_long(v.timestamp) for _, v in pairs]
    return list(entries.values())


def _list_restored(view, parallelism: int) -> list[list]:
    """What each subtask restores of a list state: its partition, or all of a UNION state."""
    from pyref.flink import DistributionMode as FlinkMode

    stored = [[_reader_json(v) for v in view.partition(i)] for i in range(parallelism)]
    if view.mode is FlinkMode.UNION:
        return [[v for part in stored for v in part]] * parallelism
    return stored


def reader_dump(flink_dir: str | os.PathLike[str], truth: dict) -> dict:
    """The export at ``flink_dir`` read with :mod:`pyref.flink` (no JVM), shaped like a
    restore job's dump at the export's parallelism, for :func:`restore_differences`."""
    from pyref.flink import FlinkSavepoint

    operators = {}
    with FlinkSavepoint.open(flink_dir, uids=list(truth["operators"])) as sp:
        for op in sp.operators:
            timers = []
            for service, domain in op.timer_services:
                view = op.timers(service, domain)
                table = view.to_arrow(raw=True)
                for subtask, group, (key, namespace, timestamp) in zip(
                        table.column("subtask").to_pylist(), table.column("key_group").to_pylist(), view.items()):
                    timers.append({"service": service, "domain": domain.replace("-", "_"), "key": _reader_json(key),
                                   "namespace": _reader_json(namespace), "timestamp": _long(timestamp),
                                   "key_group": group, "subtask": subtask})
            operator_state = {name: {"subtasks": _list_restored(op.list_state(name), op.parallelism)}
                              for name in op.list_state_names}
            operator_state.update({name: {"subtasks": [_pairs([(_reader_json(k), _reader_json(v)) for k, v in
                                                               op.broadcast_state(name).items(i)])
                                                       for i in range(op.parallelism)]}
                                   for name in op.broadcast_state_names})
            operators[op.name] = {
                "parallelism": op.parallelism, "max_parallelism": op.max_parallelism, "operator_state": operator_state,
                "keyed_state": {name: {"entries": _reader_keyed(op, name)} for name in op.keyed_state_names},
                "timers": timers, "fired_timers": [t for t in timers if t["domain"] == "event_time"]}
    return {"operators": operators}


# -- the round trip: a corpus case imported, maybe rescaled or re-hashed, exported -----------

_KEY_TYPES = {"String": "string", "Long": "int64", "Integer": "int32", "Short": "int16", "Byte": "int8",
              "Boolean": "boolean"}


def _key_type(name: str):
    if name.startswith("Tuple"):
        inner = name[name.index("<") + 1:-1]
        return tuple(_key_type(part) for part in inner.split(","))
    return _KEY_TYPES[name]


def _key(value, key_type):
    if isinstance(key_type, tuple):
        return tuple(_key(v, t) for v, t in zip(value, key_type))
    return int(value) if key_type.startswith("int") else value


def at_max_parallelism(truth: dict, changes: dict[str, int]) -> dict:
    """``truth`` after a max-parallelism change of the operators in ``changes`` (uid -> new
    max parallelism): every keyed entry and timer of theirs in its key's new key group."""
    from pyref import assign_to_key_group

    out = copy.deepcopy(truth)
    for uid, max_parallelism in changes.items():
        op = out["operators"][uid]
        key_type = _key_type(op["key_type"])
        op["max_parallelism"] = max_parallelism
        rows = [e for s in op["keyed_state"].values() for e in s["entries"]] + op["timers"]
        for row in rows:
            row["key_group"] = assign_to_key_group(_key(row["key"], key_type), max_parallelism, key_type)
    return out


def without_states(truth: dict, states: list[str]) -> dict:
    """``truth`` without the keyed states ``"uid/state"`` (those an import leaves out)."""
    out = copy.deepcopy(truth)
    for qualified in states:
        uid, name = qualified.split("/", 1)
        out["operators"][uid]["keyed_state"].pop(name)
    return out


# -- the windows case in Flink's own window operators ------------------------------------------

#: The time-window operators of the corpus's windows job (WindowsJob.restore builds them for a
#: restore): what each emits for a window that fires, from its "window-contents" state (the
#: reduced or aggregated value, or how many elements a process function was given).
WINDOW_OPERATORS = {"tumbling-reduce": "value", "sliding-aggregate": "value", "tumbling-process": "count"}


def in_window_operators(truth: dict) -> tuple[dict, dict]:
    """The job spec restoring ``truth`` (the windows case's) with :data:`WINDOW_OPERATORS` as
    Flink's window operators, and the truth of the rest of the job: those operators' window
    state and timers are Flink's own there, seen only through the windows that fire."""
    from compat_tests.flink.harness import job_spec_from_truth

    spec = job_spec_from_truth(truth)
    spec["window_operators"] = sorted(WINDOW_OPERATORS)
    rest = copy.deepcopy(truth)
    for uid in WINDOW_OPERATORS:
        rest["operators"][uid]["keyed_state"] = {}
        rest["operators"][uid]["timers"] = []
    return spec, rest


def fired_window_differences(truth: dict, dump: dict) -> list[str]:
    """Where the windows Flink's window operators fired after the restore differ from the
    windows ``truth`` holds: every pending window fires once, with the result its contents give."""
    problems = []
    for uid, result in WINDOW_OPERATORS.items():
        expected = Counter(_text([e["key"], e["namespace"], len(e["value"]) if result == "count" else e["value"]])
                           for e in truth["operators"][uid]["keyed_state"]["window-contents"]["entries"])
        fired = Counter(_text([w["key"], w["window"], w["result"]])
                        for w in dump["operators"].get(uid, {}).get("fired_windows", []))
        if not expected:
            problems.append(f"{uid}: the truth holds no pending window")
        if fired != expected:
            problems.append(f"{uid}: {sum((expected - fired).values())} windows held but not fired (e.g. "
                            f"{list(expected - fired)[:2]}), {sum((fired - expected).values())} fired but not held "
                            f"(e.g. {list(fired - expected)[:2]})")
    return problems
