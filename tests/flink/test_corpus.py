"""Every savepoint of the real-Flink corpus (compat_tests/flink/corpus) read
without a JVM and compared, state by state and entry by entry, with the
ground truth the job wrote at snapshot time (truth.json; its schema is in the
corpus README)."""

from __future__ import annotations

import json
import math
import os
import pathlib

import pytest

from pyref.flink import FlinkSavepoint, TimeWindow, TtlValue
from pyref.flink.serializers import FlinkType
from pyref.flink.values import GLOBAL_WINDOW

from compat_tests.flink.truth import UNDECODED, assert_same, entry_order, json_text, sorted_pairs

CORPUS = pathlib.Path(os.environ.get("PYREF_FLINK_CORPUS",
                                     pathlib.Path(__file__).resolve().parents[2] / "compat_tests/flink/corpus"))
CASES = sorted(p.parent for p in CORPUS.glob("*/*/*/truth.json"))


def _jsonable(value, type_: FlinkType):
    """A decoded value in the corpus's JSON conventions (README "Values in JSON")."""
    kind = type_.kind
    if value is None:
        return None
    if isinstance(value, bytes) and kind not in ("bytes", "kryo", "opaque", "avro", "value-type", "java"):
        assert type_.is_opaque, f"a {type_.describe()} value came back as bytes"
        return UNDECODED
    if kind == "ttl":
        return _jsonable(value.value if isinstance(value, TtlValue) else value, type_.children[1])
    if kind in ("int64", "bigint"):
        return value if abs(value) < 2**53 else str(value)
    if kind in ("float32", "float64"):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if kind == "bytes":
        return value.hex()
    if kind in ("kryo", "opaque", "avro", "value-type", "java"):
        return value.hex() if isinstance(value, bytes) else value
    if kind == "tuple":
        return [_jsonable(v, t) for v, t in zip(value, type_.children)]
    if kind == "row":
        return {"kind": value.kind, "fields": [_jsonable(v, t) for v, t in zip(value.fields, type_.children)]}
    if kind == "pojo":
        return {name: _jsonable(value[name], t) for name, t in zip(type_.field_names, type_.children)}
    if kind in ("list", "set", "object-array") or kind.startswith("array:"):
        element = type_.children[0] if type_.children else FlinkType(kind.split(":")[-1], "", 0, b"")
        return [_jsonable(v, element) for v in value]
    if kind == "map":
        pairs = value.items() if isinstance(value, dict) else value
        return sorted_pairs([[_jsonable(k, type_.children[0]), _jsonable(v, type_.children[1])] for k, v in pairs])
    if kind == "nullable":
        return _jsonable(value, type_.children[0])
    if kind == "time-window" or isinstance(value, TimeWindow):
        return {"start": value.start, "end": value.end}
    if value is GLOBAL_WINDOW:
        return "global"
    return value


def _keyed_entries(op, name: str) -> list[dict]:
    view = op.keyed_state(name)
    table = view.to_arrow(raw=True)
    subtasks = table.column("subtask").to_pylist()
    key_groups = table.column("key_group").to_pylist()
    grouped: dict[tuple, dict] = {}
    for row, item in enumerate(view.items(with_ttl=True)):
        key, rest = item[0], list(item[1:])
        namespace = rest.pop(0) if view.has_namespace else None
        entry = grouped.setdefault((subtasks[row], key_groups[row], json_text(_jsonable(key, view.key_type)),
                                    json_text(_jsonable(namespace, view.namespace_type))), {
            "key": _jsonable(key, view.key_type),
            "namespace": _jsonable(namespace, view.namespace_type),
            "key_group": key_groups[row], "subtask": subtasks[row]})
        value = rest[-1]
        plain = value.value if isinstance(value, TtlValue) else value
        if view.kind == "MAP":
            entry.setdefault("value", []).append([_jsonable(rest[0], view.user_key_type),
                                                  _jsonable(plain, view.value_type)])
            if view.ttl:
                entry.setdefault("ttl_timestamps", []).append(value.timestamp)
        elif view.kind == "LIST" and view.cell_type.is_opaque:
            entry["value"] = value.hex()  # the whole list's bytes: compared with the truth's joined elements
        elif view.kind == "LIST":
            entry["value"] = [_jsonable(v.value if view.ttl else v, view.value_type) for v in value]
            if view.ttl:
                entry["ttl_timestamps"] = [v.timestamp for v in value]
        else:
            entry["value"] = _jsonable(plain, view.value_type)
            if view.ttl:
                entry["ttl_timestamp"] = value.timestamp
    for entry in grouped.values():
        if view.kind == "MAP":
            order = sorted(range(len(entry["value"])), key=lambda i: json_text(entry["value"][i][0]))
            entry["value"] = [entry["value"][i] for i in order]
            if view.ttl:
                entry["ttl_timestamps"] = [entry["ttl_timestamps"][i] for i in order]
    return sorted(grouped.values(), key=entry_order)


def _check_operator_state(op, name: str, truth: dict) -> None:
    if truth["mode"] == "BROADCAST":
        view = op.broadcast_state(name)
        ours = [sorted_pairs([[_jsonable(k, view.key_type), _jsonable(v, view.value_type)]
                               for k, v in view.items(i)]) for i in range(len(view.partitions))]
    else:
        view = op.list_state(name)
        assert view.mode.name == truth["mode"], name
        ours = [[_jsonable(e, view.element_type) for e in view.partition(i)] for i in range(len(view.partitions))]
    assert_same(ours, truth["subtasks"], f"operator state {name}")


def _timers(op) -> list[dict]:
    out = []
    for service, domain in op.timer_services:
        view = op.timers(service, domain)
        table = view.to_arrow(raw=True)
        for (key, namespace, timestamp), subtask, key_group in zip(
                view.items(), table.column("subtask").to_pylist(), table.column("key_group").to_pylist()):
            out.append({"service": service, "domain": domain.replace("-", "_"),
                        "key": _jsonable(key, view.key_type), "namespace": _jsonable(namespace, view.namespace_type),
                        "timestamp": timestamp, "key_group": key_group, "subtask": subtask})
    return sorted(out, key=json_text)


@pytest.mark.skipif(not CASES, reason=f"no Flink corpus cases under {CORPUS}")
@pytest.mark.parametrize("case", CASES, ids=lambda p: "/".join(p.parts[-3:]))
def test_corpus_case_reads_as_its_truth(case: pathlib.Path) -> None:
    assert_reads_as_truth(case / "savepoint", json.loads((case / "truth.json").read_text(encoding="utf-8")))


def assert_reads_as_truth(flink_dir: pathlib.Path, truth: dict) -> None:
    """Every state, entry and timer of the Flink savepoint or checkpoint ``flink_dir`` is the truth's."""
    with FlinkSavepoint.open(flink_dir, uids=list(truth["operators"])) as sp:
        assert sp.checkpoint_id == truth["checkpoint_id"]
        for uid, expected in truth["operators"].items():
            op = sp.operator(uid)
            assert op.operator_id == expected["operator_id"]
            assert (op.parallelism, op.max_parallelism) == (expected["parallelism"], expected["max_parallelism"])
            assert set(op.list_state_names) | set(op.broadcast_state_names) == set(expected["operator_state"])
            for name, state in expected["operator_state"].items():
                _check_operator_state(op, name, state)
            assert set(op.keyed_state_names) == set(expected["keyed_state"]), uid
            for name, state in expected["keyed_state"].items():
                view = op.keyed_state(name)
                assert view.kind == state["kind"].upper(), name
                # pyref's key hash is Flink's for String, Long, Integer, Boolean and Tuple keys.
                assert view.check_key_groups() in (None, len(view)), name
                assert (view.check_key_groups() is None) == (view.key_type.kind == "pojo"), name
                assert (state["ttl"] is not None) == view.ttl, name
                entries = sorted(state["entries"], key=entry_order)
                if view.kind == "LIST" and view.cell_type.is_opaque:
                    entries = [dict(e, value=b",".join(bytes.fromhex(v["bytes"]) for v in e["value"]).hex())
                               for e in entries]
                assert_same(_keyed_entries(op, name), entries, f"{uid}/{name}")
            assert set(expected["timer_services"]) <= {s for s, _ in op.timer_services}, uid
            assert_same(_timers(op), sorted(expected["timers"], key=json_text), f"{uid} timers")
            coordinator = expected["coordinator"]
            if coordinator is None:
                assert op.coordinator_state is None or not op.coordinator_state
            else:
                version, data = op.source_coordinator_checkpoint()
                assert version == coordinator["enumerator_serializer_version"]
                assert data.hex() == coordinator["enumerator_checkpoint"]


@pytest.mark.skipif(not CASES, reason=f"no Flink corpus cases under {CORPUS}")
@pytest.mark.parametrize("case", CASES, ids=lambda p: "/".join(p.parts[-3:]))
def test_corpus_case_restore_plan_places_everything_once(case: pathlib.Path) -> None:
    with FlinkSavepoint.open(case / "savepoint") as sp:
        for op in sp.operators:
            parallelism = 3 if op.parallelism != 3 else 2
            subtasks = sp.restore_plan({op.name: parallelism}).subtasks(op.name)
            for name in op.keyed_state_names:
                total = len(op.keyed_state(name))
                placed = 0
                for sub in subtasks:
                    groups = sub.keyed_rows(name).column("key_group").to_numpy()
                    assert ((groups >= sub.key_group_range.first) & (groups <= sub.key_group_range.last)).all()
                    placed += len(groups)
                assert placed == total, (op.name, name)
            for name in op.list_state_names:
                view = op.list_state(name)
                restored = [sub.list_state(name).to_pylist() for sub in subtasks]
                everything = [e for p in view.partitions for e in p.to_pylist()]
                if view.mode.name == "UNION":
                    assert all(sorted(r) == sorted(everything) for r in restored), name
                else:
                    assert sorted(e for r in restored for e in r) == sorted(everything), name
            for name in op.broadcast_state_names:
                view = op.broadcast_state(name)
                for sub in subtasks:
                    keys, _ = sub.broadcast_state(name)
                    assert keys.equals(view.partitions[sub.index % op.parallelism][0]), name
