"""Restore plans of a Flink savepoint at any parallelism, with pyref's rules.

Keyed state moves by key group: new subtask ``i`` of parallelism ``p`` takes
the key groups :func:`pyref.key_groups.key_group_range` gives it, and each
row keeps the key group Flink stored it under. List state is redistributed by
:func:`pyref.redistribution.redistribute` (SPLIT_DISTRIBUTE runs, UNION to
everyone, BROADCAST from old subtask ``i % old_p``). The max parallelism is
the savepoint's: changing it would need every key's hash, which a Flink key
(a POJO's ``hashCode``) does not give, so it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from ..errors import InvalidArgumentError, unknown_names
from ..key_groups import KeyGroupRange, check_parallelism, key_group_bounds, key_group_range
from ..redistribution import DistributionMode as PyrefMode
from ..redistribution import redistribute
from ..restore import OperatorPlanSummary, PlanSummary, SubtaskSummary, every_operator_at
from .handles import ChangelogHandle, IncrementalHandle, KeyedHandle, stored_bytes
from .rocksdb.native import sst_files
from .savepoint import FlinkOperator, FlinkSavepoint

__all__ = ["FlinkRestorePlan", "FlinkSubtaskRestore"]


class FlinkRestorePlan:
    def __init__(self, savepoint: FlinkSavepoint, parallelism: int | Mapping[str, int]) -> None:
        self.savepoint = savepoint
        self.parallelism: dict[str, int] = {}
        given: dict[str, int] = {}  # operator name -> parallelism, the operators named as operator() names them
        if isinstance(parallelism, Mapping):
            unknown: list[str] = []
            for key, p in parallelism.items():
                if (named := savepoint.find_operator(key)) is None:
                    unknown.append(key)
                elif named.name in given:
                    raise InvalidArgumentError(f"operator {named.name} is named twice (by its uid and its id) in "
                                               f"{dict(parallelism)}", path=savepoint.location)
                else:
                    given[named.name] = p
            if unknown:
                raise unknown_names("operators", unknown, [op.name for op in savepoint.operators],
                                    path=savepoint.location)
        for op in savepoint.operators:
            p = (given.get(op.name, op.parallelism) if isinstance(parallelism, Mapping)
                 else every_operator_at(parallelism, op.max_parallelism))
            if p > op.max_parallelism:
                raise InvalidArgumentError(
                    f"operator {op.name} has max parallelism {op.max_parallelism} and cannot run at {p}; "
                    "a Flink savepoint's max parallelism cannot change (key groups are the job's own)",
                    path=savepoint.location)
            check_parallelism(p, op.max_parallelism)
            self.parallelism[op.name] = p

    def summary(self) -> PlanSummary:
        """Who restores what, in numbers, as ``pyref plan`` shows a pyref savepoint's: each new
        subtask's key groups, list elements and broadcast entries per state, and the stored
        bytes of keyed state in its key groups (from the handles' key-group offsets, RocksDB's
        files spread over their key groups; reads ``_metadata`` and the operator state streams,
        no keyed state)."""
        operators = []
        for op in self.savepoint.operators:
            p = self.parallelism[op.name]
            firsts, lasts = key_group_bounds(op.max_parallelism, p)
            sizes = np.concatenate([[0], np.cumsum(_key_group_bytes(op))])
            states = _list_counts(op)
            shares = redistribute(states, op.parallelism, p) if states else {}
            subtasks = [SubtaskSummary(
                i, int(firsts[i]), int(lasts[i]), int(sizes[lasts[i] + 1] - sizes[firsts[i]]),
                {name: sum(s.count for s in shares[name][i]) for name in op.list_state_names},
                {name: sum(s.count for s in shares[name][i]) for name in op.broadcast_state_names})
                for i in range(p)]
            operators.append(OperatorPlanSummary(op.name, op.parallelism, p, subtasks))
        return PlanSummary(self.savepoint.location, operators)

    def subtask(self, operator: str, index: int) -> FlinkSubtaskRestore:
        op = self.savepoint.operator(operator)
        p = self.parallelism[op.name]
        if not 0 <= index < p:
            raise InvalidArgumentError(f"subtask {index} outside parallelism {p} of {op.name}")
        return FlinkSubtaskRestore(op, p, index)

    def subtasks(self, operator: str) -> list[FlinkSubtaskRestore]:
        op = self.savepoint.operator(operator)
        return [self.subtask(operator, i) for i in range(self.parallelism[op.name])]


_MODES = {"SPLIT_DISTRIBUTE": PyrefMode.SPLIT_DISTRIBUTE, "UNION": PyrefMode.UNION, "BROADCAST": PyrefMode.BROADCAST}


def _key_group_bytes(op: FlinkOperator) -> np.ndarray:
    """Stored bytes of every key group's keyed state (:func:`_add_key_group_bytes`)."""
    sizes = np.zeros(op.max_parallelism, dtype=np.int64)
    for subtask in op.state.subtasks:
        if subtask.managed_keyed_state is not None:
            _add_key_group_bytes(sizes, subtask.managed_keyed_state)
    return sizes


def _add_key_group_bytes(sizes: np.ndarray, handle: KeyedHandle) -> None:
    """A handle's stored bytes added to its key groups': from a key group's offset to the next key
    group's, or to the end of the stream (an offset of 0: no bytes). RocksDB's SST files do not say
    how much each key group holds without reading them, nor does a changelog's change set: those
    bytes are spread evenly over the handle's key groups (a changelog's materialized part as its own)."""
    if isinstance(handle, ChangelogHandle):
        for inner in handle.materialized:
            _add_key_group_bytes(sizes, inner)
        _spread(sizes, handle.key_groups, stored_bytes(handle) - sum(map(stored_bytes, handle.materialized)))
        return
    if isinstance(handle, IncrementalHandle):
        _spread(sizes, handle.key_groups, sum(stream.size for _, stream in sst_files(handle)))
        return
    if handle.stream is None:
        return
    groups = np.array(handle.key_groups, dtype=np.int64)
    offsets = np.array(handle.offsets, dtype=np.int64)
    held = offsets > 0
    groups, offsets = groups[held], offsets[held]
    order = np.argsort(offsets, kind="stable")
    ends = np.append(offsets[order][1:], max(handle.stream.size, int(offsets.max(initial=0))))
    in_range = (groups[order] >= 0) & (groups[order] < len(sizes))
    sizes[groups[order][in_range]] += (ends - offsets[order])[in_range]


def _spread(sizes: np.ndarray, key_groups: range, total: int) -> None:
    """``total`` bytes spread evenly over ``key_groups`` (those below the max parallelism)."""
    first, stop = key_groups.start, min(key_groups.stop, len(sizes))
    if first < stop:
        sizes[first:stop] += total // (stop - first)
        sizes[first:first + total % (stop - first)] += 1


def _list_counts(op: FlinkOperator) -> dict[str, tuple[PyrefMode, list[int]]]:
    """Each list and broadcast state's mode and elements (entries) per old subtask."""
    states = {}
    for name in op.list_state_names:
        view = op.list_state(name)
        states[name] = (_MODES[view.mode.name], view.element_counts())
    for name in op.broadcast_state_names:
        states[name] = (PyrefMode.BROADCAST, op.broadcast_state(name).element_counts())
    return states


class FlinkSubtaskRestore:
    """What new subtask ``index`` of ``operator`` at ``parallelism`` restores."""

    def __init__(self, operator: FlinkOperator, parallelism: int, index: int) -> None:
        self.operator = operator
        self.parallelism = parallelism
        self.index = index
        self.key_group_range: KeyGroupRange = key_group_range(operator.max_parallelism, parallelism, index)

    def _slices(self, name: str):
        op = self.operator
        states = _list_counts(op)
        if name not in states:
            raise unknown_names(f"list and broadcast states of operator {op.name}", [name], states, state=name)
        return redistribute(states, op.parallelism, self.parallelism)[name][self.index]

    def list_state(self, name: str) -> pa.BinaryArray:
        """The raw elements this subtask restores of a list state, in order."""
        view = self.operator.list_state(name)
        parts = [view.partitions[s.partition].slice(s.first, s.count) for s in self._slices(name)]
        return pa.concat_arrays(parts) if parts else pa.array([], pa.binary())

    def broadcast_state(self, name: str) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        """The raw (keys, values) this subtask restores of a broadcast state."""
        view = self.operator.broadcast_state(name)
        slices = self._slices(name)
        if not slices:
            empty = pa.array([], pa.binary())
            return empty, empty
        return view.partitions[slices[0].partition]

    def keyed_rows(self, name: str) -> pa.Table:
        """The raw rows of a keyed state whose stored key group this subtask owns."""
        table = self.operator.keyed_state(name).to_arrow(raw=True)
        return _in_range(table, self.key_group_range)

    def timers(self, service: str, domain: str = "event-time") -> pa.Table:
        return _in_range(self.operator.timers(service, domain).to_arrow(raw=True), self.key_group_range)


def _in_range(table: pa.Table, groups: KeyGroupRange) -> pa.Table:
    key_groups = table.column("key_group").to_numpy()
    return table.filter(pa.array((key_groups >= groups.first) & (key_groups <= groups.last)))
