"""Every savepoint of the real-Flink corpus imported as a pyref savepoint without a JVM,
read back with pyref and compared with the truth the job wrote (values, namespaces, TTL
timestamps, timers, broadcast and union state, coordinator bytes, key groups); then
rescaled with pyref.rescale and checked, with the checker that judges real Flink
restores (compat_tests/flink/truth.py), to place every element and key exactly once
where Flink's rules put it."""

from __future__ import annotations

import math
import pathlib

import pytest

from compat_tests.flink.truth import (
    UNDECODED,
    assert_same,
    entry_order,
    json_text,
    restore_differences,
    sorted_pairs,
)
from compat_tests.flink.imports import CASES, UNSPLITTABLE, import_options, truth, ttl_configs
from pyref import Savepoint, rescale
from pyref.flink import FlinkSavepoint
from pyref.flink.import_plan import KINDS
from pyref.flink.importer import import_flink
from pyref.descriptions import MODE_NAMES
from pyref.key_groups import operator_index_for_key_group

POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
ROW = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
ROW_KINDS = {"INSERT": "+I", "UPDATE_BEFORE": "-U", "UPDATE_AFTER": "+U", "DELETE": "-D"}


_IMPORTED: dict[pathlib.Path, pathlib.Path] = {}


@pytest.fixture
def imported(case: pathlib.Path, tmp_path_factory) -> pathlib.Path:
    """The case imported once for every test of this module."""
    if case not in _IMPORTED:
        target = tmp_path_factory.mktemp("import") / "sp"
        import_flink(case / "savepoint", target, **import_options(case))
        _IMPORTED[case] = target
    return _IMPORTED[case]


# -- pyref values in the truth's JSON conventions (corpus README, "Values in JSON") ------


def to_json(value, snapshot):
    """A value pyref decoded, as the truth writes it; the serializer's engine snapshot says
    which Flink type a tuple or nullable stands for (POJO, Row)."""
    sid, engine = snapshot.serializer_id, snapshot.engine.class_name
    if value is None:
        return "global" if sid == "global-window" else None
    if sid == "nullable":
        inner = snapshot.nested[0]
        if engine == POJO:
            return {n: to_json(v, f) for n, v, f in zip(inner.field_names, value, inner.nested)}
        return to_json(value, inner)
    if sid == "tuple":
        fields = [to_json(v, f) for v, f in zip(value, snapshot.nested)]
        return {"kind": ROW_KINDS[value[0]], "fields": fields[1:]} if engine == ROW else fields
    if sid == "opaque":
        return UNDECODED if engine == POJO else value.hex()
    if sid == "int64":
        return value if abs(value) < 2**53 else str(value)
    if sid in ("float32", "float64") and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if sid == "bytes":
        return value.hex()
    if sid == "list":
        return [to_json(v, snapshot.nested[0]) for v in value]
    if sid == "map":
        return sorted_pairs([[to_json(k, snapshot.nested[0]), to_json(v, snapshot.nested[1])]
                             for k, v in value.items()])
    if sid == "time-window":
        return {"start": value.start, "end": value.end}
    return value


def savepoint_view(path: pathlib.Path) -> dict:
    """What every subtask of a pyref savepoint held, in truth.json's shape, values decoded
    in the truth's conventions."""
    return _view(path, None, True)


def restored_view(path: pathlib.Path, parallelism: int | None = None) -> dict:
    """What every subtask restores at ``parallelism`` (None: what every subtask held), in
    truth.json's shape, every key, value and element as the hex of its encoding, one
    entry per stored row."""
    return _view(path, parallelism, False)


def _view(path: pathlib.Path, parallelism: int | None, decode: bool) -> dict:
    sp = Savepoint.open(path)
    operators = {}
    for op in sp.operators:
        p = parallelism or op.parallelism
        plan = sp.restore_plan({op.operator_id: p})
        subtasks = plan.subtasks(op.operator_id)
        key = op.proto.key_serializer
        doc = operators[op.operator_id] = {
            "uid": op.uid, "engine_operator_id": op.engine_operator_id.hex(), "parallelism": p,
            "max_parallelism": op.max_parallelism, "key_type": op.proto.key_serializer.serializer_id or None,
            "key_groups": "writer" if op.writer_assigned_key_groups else "hashed",
            "coordinator": op.coordinator_state, "operator_state": {}, "keyed_state": {}, "timers": []}
        for name in op.list_state_names:
            view = op.list_state(name)
            element = view.proto.element_serializer
            doc["operator_state"][name] = {"mode": MODE_NAMES[view.proto.mode], "subtasks": [
                [to_json(view.serializer.decode(e), element) if decode else e.hex()
                 for cells in view.read_encoded(ranges) for e in cells.to_pylist()]
                for ranges in _partitions(view, subtasks, parallelism, name)]}
        for name in op.broadcast_state_names:
            view = op.broadcast_state(name)
            doc["operator_state"][name] = {"mode": "BROADCAST", "subtasks": [sorted_pairs([
                [to_json(view.key_serializer.decode(k), view.proto.key_serializer) if decode else k.hex(),
                 to_json(view.value_serializer.decode(v), view.proto.value_serializer) if decode else v.hex()]
                for k, v in zip(*(c.to_pylist() for c in view.encoded_entries(ranges)))])
                for ranges in _partitions(view, subtasks, parallelism, name)]}
        for name in op.keyed_state_names:
            view = op.keyed_state(name)
            read = _keyed_entries if decode else _encoded_entries
            entries = [e for sub in subtasks for e in read(view, key, sub.keyed_chunks(name), sub.index)]
            doc["keyed_state"][name] = {"kind": view.kind, "ttl": view.ttl, "entries": sorted(entries, key=entry_order)}
        for service in op.timer_services:
            serializers = service._serializers()
            for sub in subtasks:
                for batch in service.arrow_batches(sub.timer_chunks(service.name, service.domain)):
                    columns = [[s._from_arrow_value(v) for v in batch.column(i + 1).to_pylist()]
                               for i, s in enumerate(serializers)]
                    for group, row in zip(batch.column("key_group").to_pylist(), zip(*columns)):
                        doc["timers"].append({
                            "service": service.name, "domain": service.domain,
                            "key": to_json(row[0], key) if decode else service.key_serializer.encode(row[0]).hex(),
                            "namespace": (to_json(row[1], service.proto.namespace_serializer)
                                          if service.namespace_serializer else None),
                            "timestamp": row[-1], "key_group": group, "subtask": sub.index})
        doc["timers"].sort(key=json_text)
    return {"operators": operators}


def _partitions(view, subtasks, parallelism: int | None, name: str) -> list:
    """The ranges of each stored partition, or of each subtask of a restore plan."""
    if parallelism is None:
        return [p.ranges for p in view.proto.partitions]
    return [sub.list_ranges(name) for sub in subtasks]


def _encoded_entries(view, key, chunks, subtask: int) -> list[dict]:
    """One entry per stored row: key, [namespace], [user key] and value as hex."""
    entries = []
    for group, columns in view.read_encoded(chunks):
        names = ["key", *(["namespace"] if view.namespaced else []), *(["user_key"] if view.kind == "map" else []),
                 "value"]
        for row in zip(*(c.to_pylist() for c in columns)):
            entry = {"namespace": None, **{n: v.hex() for n, v in zip(names, row)}}
            entries.append({**entry, "key_group": group, "subtask": subtask})
    return entries


def _keyed_entries(view, key, chunks, subtask: int) -> list[dict]:
    """The entries of a subtask's chunks, grouped as the truth groups them (a MAP state's
    pairs under their key)."""
    grouped: dict[str, dict] = {}
    state = view.proto
    groups = [c.key_group for c in chunks for _ in range(c.row_count)]
    for group, row in zip(groups, view.iter_chunks(chunks, with_ttl=view.ttl is not None)):
        row = list(row)
        stamp = row.pop() if view.ttl is not None else None
        k = row.pop(0)
        namespace = row.pop(0) if view.namespaced else None
        entry_key = to_json(k, key)
        ns = to_json(namespace, state.namespace_serializer) if view.namespaced else None
        entry = grouped.setdefault(json_text([entry_key, ns]), {"key": entry_key, "namespace": ns,
                                                               "key_group": group, "subtask": subtask})
        value = row[-1]
        if view.kind == "map":
            entry.setdefault("value", []).append([to_json(row[0], state.user_key_serializer),
                                                  to_json(value, state.value_serializer)])
            if stamp is not None:
                entry.setdefault("ttl_timestamps", []).append(stamp)
        elif view.kind == "list":
            entry["value"] = [to_json(v, state.value_serializer) for v in value]
            if stamp is not None:
                entry["ttl_timestamps"] = stamp
        else:
            entry["value"] = to_json(value, state.value_serializer)
            if stamp is not None:
                entry["ttl_timestamp"] = stamp
    for entry in grouped.values():
        if view.kind == "map":  # the truth sorts a map's pairs by user key (its timestamps with them)
            order = sorted(range(len(entry["value"])), key=lambda i: json_text(entry["value"][i][0]))
            entry["value"] = [entry["value"][i] for i in order]
            if "ttl_timestamps" in entry:
                entry["ttl_timestamps"] = [entry["ttl_timestamps"][i] for i in order]
    return list(grouped.values())


# -- the tests ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda p: "/".join(p.parts[-3:]))
def test_import_reads_back_as_the_truth(case: pathlib.Path, imported: pathlib.Path) -> None:
    expected_truth = truth(case)
    ours = savepoint_view(imported)["operators"]
    skipped = {s.split("/", 1)[1] for s in UNSPLITTABLE.get(case.name, [])}
    with FlinkSavepoint.open(case / "savepoint", uids=list(expected_truth["operators"])) as flink:
        for uid, expected in expected_truth["operators"].items():
            op = ours[uid]
            assert op["uid"] == uid and op["engine_operator_id"] == expected["operator_id"]
            assert (op["parallelism"], op["max_parallelism"]) == (expected["parallelism"], expected["max_parallelism"])
            # Key groups are hashed (and were checked at import) where pyref's hash is Java's: not for POJO keys.
            keyed = bool(expected["keyed_state"]) or bool(expected["timers"])
            if keyed:
                pojo = expected["key_type"].startswith("pojo:")
                assert op["key_groups"] == ("writer" if pojo else "hashed"), uid
            assert set(op["operator_state"]) == set(expected["operator_state"]), uid
            for name, state in expected["operator_state"].items():
                assert_same(op["operator_state"][name]["subtasks"], state["subtasks"], f"{uid}/{name}")
            assert set(op["keyed_state"]) == set(expected["keyed_state"]) - skipped, uid
            for name, got in op["keyed_state"].items():
                state = expected["keyed_state"][name]
                assert got["kind"] == KINDS[state["kind"].upper()], name
                assert got["ttl"] == (ttl_configs(expected_truth)[f"{uid}/{name}"] if state["ttl"] else None), name
                assert_same(got["entries"], sorted(state["entries"], key=entry_order), f"{uid}/{name}")
            assert_same(op["timers"], sorted(expected["timers"], key=json_text), f"{uid} timers")
            # Coordinator state: Flink's bytes exactly (the source coordinator's framing included).
            assert op["coordinator"] == flink.operator(uid).coordinator_state
            if expected["coordinator"] is not None:
                assert flink.operator(uid).source_coordinator_checkpoint()[1].hex() == \
                    expected["coordinator"]["enumerator_checkpoint"]


#: Rescaling depends on the imported savepoint, not on the Flink release that wrote the
#: source: the default tier rescales the newest release's cases, ``slow`` every release's.
_NEWEST = CASES[-1].parts[-3] if CASES else None
RESCALE_CASES = [pytest.param(c, marks=() if c.parts[-3] == _NEWEST else pytest.mark.slow) for c in CASES]


@pytest.mark.parametrize("case", RESCALE_CASES, ids=lambda p: "/".join(p.parts[-3:]))
def test_rescaled_import_places_everything_once(case: pathlib.Path, imported: pathlib.Path) -> None:
    """pyref.rescale to parallelism 1 and 4: every element, key and timer of the import is
    restored once, where Flink's rules put it (the checker of real Flink restores)."""
    written = restored_view(imported)
    for parallelism in (1, 4):
        target = imported.parent / f"p{parallelism}"  # a sibling: the rescale refers to the import's files
        rescale(imported, target, parallelism)
        restored = restored_view(target, parallelism)
        for op in restored["operators"].values():
            assert op["parallelism"] == parallelism
            for entries in [op["timers"], *(s["entries"] for s in op["keyed_state"].values())]:
                assert all(e["subtask"] == operator_index_for_key_group(op["max_parallelism"], parallelism,
                                                                         e["key_group"]) for e in entries)
        assert restore_differences(written, restored, fired=False) == [], parallelism
