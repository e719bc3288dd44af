"""Exporting a pyref savepoint as a canonical Flink savepoint.

:func:`plan_export` checks everything Flink could refuse before a byte is written
and cuts the work into :class:`HandleTask` s: one per subtask and kind of state
(keyed, operator) of every exported operator at its Flink parallelism. A
:class:`HandleWriter` runs a task wherever it is (here, or in a Spark task) and
returns the handle it wrote (:mod:`.metadata`). The handles of every task make
``_metadata``, which :class:`~.directory.ExportDirectory` publishes last.

Operators keep pyref's max parallelism (a Flink job restoring them must have the
same, or leave its own unset). Their Flink ``OperatorID`` is the 16 bytes pyref
recorded (``engine_operator_id``), else Flink's hash of the uid (the operator's
``uid``, else its pyref operator id), as ``StreamGraphHasherV2`` derives it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...errors import InvalidArgumentError
from ...key_groups import UPPER_BOUND_MAX_PARALLELISM, key_group_range
from ...reader import OperatorView, Savepoint
from ...restore import every_operator_at
from ...storage import open_io
from ..dataoutput import utf
from ..savepoint import operator_id_named, operator_id_of_uid
from .directory import DEFAULT_INLINE_BYTES, ExportDirectory, StateStream, StreamRef, check_metadata_parses
from .keyed import KeyedExport
from .metadata import (
    KeyedHandle,
    OperatorEntry,
    OperatorHandle,
    SubtaskHandles,
    flink_release,
    metadata_bytes,
    metadata_version,
)
from .operator_state import OperatorStateExport

__all__ = ["HandleTask", "HandleWriter", "ExportPlan", "ExportResult", "plan_export", "export_savepoint"]

Path = str | os.PathLike[str]


@dataclass(frozen=True)
class HandleTask:
    """Write one state handle: the keyed stream (``keyed``) or the operator-state stream
    of ``subtask`` of ``operator_id`` at ``parallelism``."""

    operator_id: str
    subtask: int
    parallelism: int
    keyed: bool


@dataclass(frozen=True)
class OperatorPlan:
    operator_id: str
    flink_operator_id: bytes
    uid: str
    name: str
    parallelism: int
    max_parallelism: int
    keyed: bool
    operator_state: bool


@dataclass(frozen=True)
class ExportPlan:
    flink_version: str
    metadata_version: int
    checkpoint_id: int
    operators: list[OperatorPlan]

    def tasks(self) -> list[HandleTask]:
        return [HandleTask(op.operator_id, i, op.parallelism, keyed) for op in self.operators
                for keyed in (True, False) if (op.keyed if keyed else op.operator_state)
                for i in range(op.parallelism)]

    def metadata(self, source: Savepoint, handles: Mapping[HandleTask, KeyedHandle | OperatorHandle]) -> bytes:
        entries = []
        for op in self.operators:
            subtasks = []
            for i in range(op.parallelism):
                operator_state = handles.get(HandleTask(op.operator_id, i, op.parallelism, False))
                keyed_state = handles.get(HandleTask(op.operator_id, i, op.parallelism, True))
                # A task writes the keyed stream when its keyed flag is set, else the operator stream.
                assert operator_state is None or isinstance(operator_state, OperatorHandle)
                assert keyed_state is None or isinstance(keyed_state, KeyedHandle)
                subtasks.append(SubtaskHandles(i, operator_state, keyed_state))
            entries.append(OperatorEntry(op.flink_operator_id, op.parallelism, op.max_parallelism, subtasks,
                                         uid=op.uid, name=op.name,
                                         coordinator_state=source.operator(op.operator_id).coordinator_state))
        return metadata_bytes(self.metadata_version, self.checkpoint_id, entries)


@dataclass
class ExportResult:
    """What :func:`export_savepoint` wrote."""

    path: str
    flink_version: str
    metadata_version: int
    operators: list[dict] = field(default_factory=list)
    state_files: int = 0
    inline_handles: int = 0
    state_bytes: int = 0

    def to_dict(self) -> dict:
        return {"path": self.path, "flink_version": self.flink_version, "metadata_version": self.metadata_version,
                "operators": self.operators, "state_files": self.state_files, "inline_handles": self.inline_handles,
                "state_bytes": self.state_bytes}


def flink_operator_id(op: OperatorView) -> bytes:
    """Flink's ``OperatorID`` of the operator: the recorded one, else the hash of its uid."""
    if op.engine_operator_id:
        if len(op.engine_operator_id) != 16:
            raise InvalidArgumentError(f"operator {op.operator_id!r}: its engine operator id has "
                                       f"{len(op.engine_operator_id)} bytes; Flink's OperatorID has 16")
        return op.engine_operator_id
    return bytes.fromhex(operator_id_of_uid(op.uid or op.operator_id))


def _is_keyed(op: OperatorView) -> bool:
    """The operator holds keyed state or timers (so key groups)."""
    return bool(op.keyed_state_names or op.proto.timer_services)


def _is_named(op: OperatorView, name: str) -> bool:
    """``name`` is the operator's id, its uid, or names the Flink ``OperatorID`` it is exported
    as: its hex (in either case) or the job's uid it is the hash of (an import of Flink 1.x,
    which stores no uids, is named by hex ids, and the user knows the job's uids)."""
    return name in (op.operator_id, op.uid) or operator_id_named(name) == flink_operator_id(op).hex()


def _names(ops: Iterable[OperatorView]) -> str:
    """Operator ids (and uids) for an error that names the ones there are."""
    return ", ".join(op.operator_id + (f" (uid {op.uid})" if op.uid and op.uid != op.operator_id else "")
                     for op in ops)


def _selected(source: Savepoint, operators: Iterable[str] | None) -> list[OperatorView]:
    views = source.operators
    if operators is None:
        return views
    if isinstance(operators, str):
        raise InvalidArgumentError("operators is a list of operator ids, not one string")
    wanted = list(dict.fromkeys(operators))
    found = {name: next((op for op in views if _is_named(op, name)), None) for name in wanted}
    missing = [name for name, op in found.items() if op is None]
    if missing:
        raise InvalidArgumentError(f"no such operators: {missing}; the savepoint has {_names(views)}",
                                   path=source.location)
    return [op for op in found.values() if op is not None]


def _parallelism_of(ops: list[OperatorView], parallelism: int | Mapping[str, int] | None) -> dict[str, int]:
    if parallelism is None:
        return {op.operator_id: op.parallelism for op in ops}
    if isinstance(parallelism, Mapping):
        # An operator is named by its id, its uid or its Flink id (what the Flink job knows it by).
        by_name = {name: op.operator_id for name in parallelism for op in ops if _is_named(op, name)}
        unknown = sorted(set(parallelism) - set(by_name))
        if unknown:
            raise InvalidArgumentError(f"parallelism given for operators not exported: {unknown}; exported are "
                                       f"{_names(ops)}")
        given = {by_name[name]: n for name, n in parallelism.items()}
        if len(given) < len(parallelism):
            raise InvalidArgumentError(f"an operator is named twice (by its id, uid or Flink id) in {dict(parallelism)}")
        return {op.operator_id: given.get(op.operator_id, op.parallelism) for op in ops}
    return {op.operator_id: every_operator_at(parallelism, op.max_parallelism) for op in ops}


def _check_operator(op: OperatorView, parallelism: int) -> None:
    if op.max_parallelism > UPPER_BOUND_MAX_PARALLELISM:
        raise InvalidArgumentError(f"operator {op.operator_id!r} has max parallelism {op.max_parallelism}; Flink's "
                                   f"limit is {UPPER_BOUND_MAX_PARALLELISM}")
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or not 1 <= parallelism:
        raise InvalidArgumentError(f"operator {op.operator_id!r}: parallelism must be a whole number >= 1, "
                                   f"got {parallelism!r}")
    if parallelism > op.max_parallelism:
        # Without keyed state or timers no key group is assigned: change-max-parallelism takes it.
        remedy = ("its writer assigned the key groups, so its max parallelism cannot change"
                  if op.writer_assigned_key_groups and _is_keyed(op) else
                  "change the max parallelism first (pyref change-max-parallelism)")
        raise InvalidArgumentError(f"operator {op.operator_id!r} has max parallelism {op.max_parallelism} and cannot "
                                   f"run at parallelism {parallelism} in Flink; {remedy}")


def plan_export(source: Savepoint, flink_version: str, parallelism: int | Mapping[str, int] | None = None,
                operators: Iterable[str] | None = None, checkpoint_id: int = 1) -> ExportPlan:
    """Check that Flink can take every selected operator at its parallelism (serializers,
    names, ids, parallelism) and plan the handles to write."""
    version = metadata_version(flink_version)
    ops = _selected(source, operators)
    wanted = _parallelism_of(ops, parallelism)
    if isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, int) or checkpoint_id < 0:
        raise InvalidArgumentError(f"checkpoint_id must be a whole number >= 0, got {checkpoint_id!r}")
    plans: list[OperatorPlan] = []
    ids: dict[bytes, str] = {}  # Flink operator id: the pyref operator that has it
    for op in ops:
        p = wanted[op.operator_id]
        _check_operator(op, p)
        flink_id = flink_operator_id(op)
        if flink_id in ids:
            raise InvalidArgumentError(f"operators {ids[flink_id]!r} and {op.operator_id!r} have the same Flink "
                                       f"operator id {flink_id.hex()}")
        ids[flink_id] = op.operator_id
        uid = op.uid or ("" if op.engine_operator_id else op.operator_id)
        utf(uid, f"uid of operator {op.operator_id!r}")
        utf(op.proto.name, f"name of operator {op.operator_id!r}")
        keyed = _is_keyed(op)
        if keyed:
            KeyedExport(op, flink_release(flink_version))  # refuses what Flink cannot take before anything is written
        has_operator_state = OperatorStateExport(op, p, flink_release(flink_version)).has_state
        plans.append(OperatorPlan(op.operator_id, flink_id, uid, op.proto.name, p, op.max_parallelism, keyed,
                                  has_operator_state))
    return ExportPlan(flink_version, version, checkpoint_id, plans)


class HandleWriter:
    """Writes handles of one source savepoint for a Flink release into a directory (one per
    process: it keeps each operator's serializers and plans between tasks)."""

    def __init__(self, source: Savepoint, flink_version: str, directory: str, file_prefix: str,
                 inline_bytes: int = DEFAULT_INLINE_BYTES) -> None:
        self.source = source
        self.release = flink_release(flink_version)
        self.io = open_io(directory)  # one client for every stream this process writes
        self.file_prefix = file_prefix
        self.inline_bytes = inline_bytes
        self._exports: dict = {}

    def _export(self, task: HandleTask):
        key = (task.operator_id, task.parallelism, task.keyed)
        if key not in self._exports:
            op = self.source.operator(task.operator_id)
            self._exports[key] = (KeyedExport(op, self.release) if task.keyed
                                  else OperatorStateExport(op, task.parallelism, self.release))
        return self._exports[key]

    def write(self, task: HandleTask) -> KeyedHandle | OperatorHandle:
        export = self._export(task)
        stream = StateStream(self.io, self.file_prefix, self.inline_bytes)
        try:
            if task.keyed:
                groups = key_group_range(export.operator.max_parallelism, task.parallelism, task.subtask)
                offsets = export.write(stream, groups)
                return KeyedHandle(groups.first, offsets, stream.close())
            states = export.write(stream, task.subtask)
            return OperatorHandle(states, stream.close())
        except BaseException:
            stream.discard()
            raise


def _summary(result: ExportResult, plan: ExportPlan, handles: Mapping[HandleTask, KeyedHandle | OperatorHandle]
             ) -> None:
    streams: list[StreamRef] = [h.stream for h in handles.values()]
    result.state_files = sum(not s.inline for s in streams)
    result.inline_handles = sum(s.inline for s in streams)
    result.state_bytes = sum(s.size for s in streams)
    result.operators = [{"operator_id": op.operator_id, "uid": op.uid, "flink_operator_id": op.flink_operator_id.hex(),
                         "parallelism": op.parallelism, "max_parallelism": op.max_parallelism}
                        for op in plan.operators]


def publish(source: Savepoint, plan: ExportPlan, directory: ExportDirectory,
            handles: Mapping[HandleTask, KeyedHandle | OperatorHandle]) -> ExportResult:
    """Write ``_metadata`` of the handles written, last, and report what was exported."""
    metadata = plan.metadata(source, handles)
    check_metadata_parses(metadata, directory.path)
    directory.commit(metadata, {h.stream.name: h.stream.size for h in handles.values() if not h.stream.inline})
    result = ExportResult(directory.path, plan.flink_version, plan.metadata_version)
    _summary(result, plan, handles)
    return result


def prepare_export(src: Path, dst: Path, *, flink_version: str, parallelism: int | Mapping[str, int] | None = None,
                   operators: Iterable[str] | None = None, inline_bytes: int = DEFAULT_INLINE_BYTES,
                   overwrite: bool = False, checkpoint_id: int = 1) -> tuple[Savepoint, ExportPlan, ExportDirectory]:
    """What an export checks before it writes anything: the source, the plan (serializers,
    names, ids, parallelism) and the target; the Spark export's CLI checks it before Spark starts."""
    if isinstance(inline_bytes, bool) or not isinstance(inline_bytes, int) or inline_bytes < 0:
        raise InvalidArgumentError(f"inline_bytes must be a whole number >= 0, got {inline_bytes!r}")
    source = Savepoint.open(src)
    plan = plan_export(source, flink_version, parallelism, operators, checkpoint_id)
    return source, plan, ExportDirectory(os.fspath(dst), overwrite=overwrite)


def export_savepoint(src: Path, dst: Path, *, flink_version: str, parallelism: int | Mapping[str, int] | None = None,
                     operators: Iterable[str] | None = None, inline_bytes: int = DEFAULT_INLINE_BYTES,
                     overwrite: bool = False, checkpoint_id: int = 1) -> ExportResult:
    """Write the pyref savepoint ``src`` (or its ``operators``) to ``dst`` as a canonical
    savepoint Flink ``flink_version`` restores, at each operator's parallelism or
    ``parallelism`` (one for all, or by operator id). State streams up to
    ``inline_bytes`` go into ``_metadata``, larger ones into files beside it.

    ``_metadata`` is written last and atomically; a failed export removes what it wrote.
    An existing Flink savepoint at ``dst`` is replaced only with ``overwrite``."""
    source, plan, directory = prepare_export(src, dst, flink_version=flink_version, parallelism=parallelism,
                                             operators=operators, inline_bytes=inline_bytes, overwrite=overwrite,
                                             checkpoint_id=checkpoint_id)
    try:
        writer = HandleWriter(source, plan.flink_version, directory.path, directory.file_prefix, inline_bytes)
        handles = {task: writer.write(task) for task in plan.tasks()}
        return publish(source, plan, directory, handles)
    except BaseException:
        directory.abort()
        raise
