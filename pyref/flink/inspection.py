"""What a Flink savepoint holds (:func:`describe_flink`) and whether all of it reads
(:func:`verify_flink`): ``pyref inspect`` and ``pyref verify`` on a directory with a
Flink ``_metadata``.

``describe_flink`` reads ``_metadata``, the operator state streams and the head of
each keyed stream (serializer snapshots), never a key group; it also says how
``pyref import-flink`` would name each operator and assign its key groups, and
what the import would refuse. ``verify_flink`` decodes every value of every state
and timer, a run of key groups at a time, and recomputes every key's key group
where pyref's key hash is Java's for the key type (String, Integer, Long,
Boolean keys and Tuples of them); errors are collected per state, not raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CorruptSavepointError, InvalidArgumentError, SavepointError, UnsupportedFormatError
from ..inspection import VerifyReport
from .handles import stored_bytes
from .import_plan import plan_import
from .meta_info import unreadable_async_state
from .savepoint import FlinkOperator, FlinkSavepoint, _prefix_bytes, timer_types
from .sources import describe_source
from .state_views import FlinkKeyedStateView, FlinkTimerView
from .values import decode_column

__all__ = ["describe_flink", "verify_flink", "FlinkVerifyReport"]

#: Stored bytes of keyed state verify decodes at once.
VERIFY_BATCH_BYTES = 32 << 20


def _operator(op: FlinkOperator, location: str) -> dict:
    subtasks = op.state.subtasks
    states: list[dict[str, Any]] = []
    for name in op.list_state_names:
        view = op.list_state(name)
        states.append({"name": name, "type": "list", "mode": view.mode.name, "flink_type": view.element_type.describe(),
                       "elements_per_subtask": view.element_counts()})
    for name in op.broadcast_state_names:
        broadcast = op.broadcast_state(name)
        states.append({"name": name, "type": "broadcast", "mode": "BROADCAST",
                       "flink_type": f"{broadcast.key_type.describe()} -> {broadcast.value_type.describe()}",
                       "entries_per_subtask": broadcast.element_counts()})
    layouts: list[str] = []
    try:  # the layout first: said of keyed state the reader refuses too (a changelog's before materialization)
        layouts = sorted({layout for s in subtasks if (layout := op.keyed_layout(s.index)) is not None})
        key_type, infos = op.keyed_meta()
        refused = None
    except SavepointError as exc:
        key_type, infos, refused = None, {}, exc.reason
    timers = []
    for name, info in sorted(infos.items()):
        value = info.serializers["VALUE_SERIALIZER"]
        if info.backend_type == "PRIORITY_QUEUE":
            timers.append({"name": name, "flink_type": value.describe()})
            continue
        namespace = info.serializers["NAMESPACE_SERIALIZER"]
        states.append({"name": name, "type": "keyed", "kind": info.options.get("KEYED_STATE_TYPE", info.backend_type),
                       "flink_type": value.describe(), "ttl": value.kind == "ttl" or any(
                           c.kind == "ttl" for c in value.children),
                       "namespace": None if namespace.kind == "void-namespace" else namespace.describe(),
                       # KEY_VALUE_V2: the async state API's (Flink 2.0+, ForSt); its rows are the classic API's.
                       "async_state_api": info.backend_type == "KEY_VALUE_V2",
                       "refused": unreadable_async_state(info)})
    keyed = [s.managed_keyed_state for s in subtasks if s.managed_keyed_state is not None]
    return {
        "operator_id": op.operator_id, "name": op.name, "uid": op.uid, "flink_name": op.flink_name,
        "parallelism": op.parallelism, "max_parallelism": op.max_parallelism, "finished": op.finished,
        "key_type": key_type.describe() if key_type is not None else None,
        "keyed_state_bytes": sum(stored_bytes(h) for h in keyed),
        # savepoint-format, heap (a HashMap checkpoint's), rocksdb-native (RocksDB's SST files) or changelog
        "keyed_state_layout": "/".join(layouts) or None,
        # The heap layout gives every key group an offset, empty or not; RocksDB's files and a changelog none.
        "key_groups_with_data": None if {"heap", "rocksdb-native", "changelog"} & set(layouts) else sum(
            sum(1 for o in getattr(h, "offsets", ()) if o) for h in keyed),
        "operator_state_bytes": sum(stored_bytes(s.managed_operator_state) for s in subtasks),
        "coordinator_state_bytes": len(op.coordinator_state) if op.coordinator_state is not None else None,
        # A FLIP-27 source's splits and enumerator checkpoint, decoded (pyref.flink.sources).
        "source": describe_source(op, path=location),
        # An unaligned checkpoint's buffers between operators (counted, not decoded).
        "in_flight": op.in_flight,
        "states": states, "timer_queues": timers, "keyed_state_refused": refused,
    }


def describe_flink(sp: FlinkSavepoint) -> dict:
    """The savepoint's operators, states, serializer types, sizes, and what
    ``pyref import-flink`` (with no options) would do with it."""
    info = {"location": sp.location, "format": "flink", "metadata_version": sp.version,
            "checkpoint_id": sp.checkpoint_id, "snapshot_format": sp.metadata.snapshot_format,
            "operators": [_operator(op, sp.location) for op in sp.operators], "import": {}}
    try:
        plans = plan_import(sp)
        info["import"] = {"operators": {p.flink.operator_id: {"operator_id": p.operator_id, "key_groups": (
            p.key_groups if p.has_keyed else None)} for p in plans}}
    except (InvalidArgumentError, SavepointError) as exc:
        info["import"] = {"refused": exc.reason}
    return info


@dataclass
class FlinkVerifyReport(VerifyReport):
    """``chunks`` counts the state handles read; ``keys_checked`` the keys whose key group
    was recomputed and found where Flink stored them."""

    keys_checked: int = 0

    def to_dict(self) -> dict:
        return {**super().to_dict(), "keys_checked": self.keys_checked}


def verify_flink(sp: FlinkSavepoint) -> FlinkVerifyReport:
    """Decode every value of the savepoint; check key groups where pyref can hash the keys."""
    report = FlinkVerifyReport()
    for op in sp.operators:
        _verify_operator_state(op, report)
        _verify_keyed_state(op, report)
        _verify_in_flight(sp, op, report)
    try:
        plan_import(sp)
    except SavepointError as exc:
        report.warnings.append(f"import-flink would refuse: {exc.reason}")
    except InvalidArgumentError as exc:
        report.warnings.append(f"import-flink needs: {exc.reason}")
    return report


def _verify_operator_state(op: FlinkOperator, report: FlinkVerifyReport) -> None:
    try:
        names = (op.list_state_names, op.broadcast_state_names)
    except SavepointError as exc:
        _note(report, exc, f"{op.name} operator state")
        return
    report.chunks += sum(1 for s in op.state.subtasks if s.managed_operator_state is not None)
    for name in names[0]:
        try:
            view = op.list_state(name)
            for partition in view.partitions:
                report.values += len(decode_column(view.element_type, partition, state=f"{op.name}/{name}"))
        except SavepointError as exc:
            _note(report, exc, f"{op.name}/{name}")
    for name in names[1]:
        try:
            broadcast = op.broadcast_state(name)
            report.values += 2 * sum(len(broadcast.items(i)) for i in range(len(broadcast.partitions)))
        except SavepointError as exc:
            _note(report, exc, f"{op.name}/{name}")


def _verify_keyed_state(op: FlinkOperator, report: FlinkVerifyReport) -> None:
    try:
        _, infos = op.keyed_meta()
        timers = {n: i for n, i in infos.items() if i.backend_type == "PRIORITY_QUEUE"}
        batches = op.keyed_subtasks(VERIFY_BATCH_BYTES)
        seen = set()
        for batch in batches:
            if batch.subtask not in seen:
                seen.add(batch.subtask)
                report.chunks += 1
            for name, (info, rows) in batch.states.items():
                if not len(rows.keys):
                    continue
                label = f"{op.name}/{name}"
                try:
                    view: FlinkTimerView | FlinkKeyedStateView
                    if name in timers:
                        view = FlinkTimerView(name, "", *timer_types(info), rows,
                                              _prefix_bytes(op.max_parallelism), op.max_parallelism)
                    else:
                        view = FlinkKeyedStateView.of(info, batch.key_type, rows, _prefix_bytes(op.max_parallelism),
                                                      op.max_parallelism)
                    report.values += sum(len(item) for item in view.items())
                    report.keys_checked += view.check_key_groups(label) or 0
                except SavepointError as exc:
                    _note(report, exc, label)
    except SavepointError as exc:
        _note(report, exc, f"{op.name} keyed state")


def _verify_in_flight(sp: FlinkSavepoint, op: FlinkOperator, report: FlinkVerifyReport) -> None:
    """An unaligned checkpoint's in-flight data: its files must hold each handle's bytes (not decoded)."""
    for subtask in op.state.subtasks:
        for handle in subtask.in_flight:
            if handle.stream is None:
                continue
            try:
                _, start, end, name = sp.store.open(handle.stream)
                if handle.size > end - start:
                    raise CorruptSavepointError(f"{handle.direction} in-flight data of subtask {subtask.index}: "
                                                f"{handle.size} bytes in a stream of {end - start}", path=name)
            except SavepointError as exc:
                _note(report, exc, f"{op.name} in-flight data")


def _note(report: FlinkVerifyReport, exc: SavepointError, where: str) -> None:
    """Damage is an error; what this reader does not read (native-format state...) a warning."""
    text, notes = f"{where}: {exc}", report.warnings if isinstance(exc, UnsupportedFormatError) else report.errors
    if text not in notes:  # once, not once per subtask
        notes.append(text)
