"""Restore plans: what every subtask of a new parallelism restores.

Planning reads and writes no state bytes: keyed state and timers are assigned by
key-group range (spec/key-groups.md §5, spec/format.md §7.9), list and broadcast
state by redistributing element counts (spec/redistribution.md, §9 for broadcast
state), and the result is a list of references into the savepoint's existing
chunks. A subtask then reads only the chunks it was given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from functools import cached_property
from numbers import Integral
from typing import Any

import numpy as np
import pyarrow as pa

from ._proto.savepoint.v1 import manifest_pb2 as pb
from .errors import InvalidArgumentError, unknown_names
from .key_groups import KeyGroupRange, check_parallelism, key_group_bounds, key_group_range
from .reader import KeyedStateView, ListStateView, OperatorView, Savepoint, locate_in_partition, partition_starts
from .redistribution import DistributionMode, redistribute
from .serializers import Serializer
from .timers import TimerServiceView, find_timer_service


def plan_list_state(operator: pb.Operator, new_parallelism: int) -> dict[str, list[list[pb.ElementRange]]]:
    """Per list state and (format 1.2) broadcast state, the chunk ranges each new subtask
    restores, in order. Broadcast states follow the BROADCAST rule (spec/redistribution.md
    §9) and take no part in the rotation of SPLIT_DISTRIBUTE states.

    Subtasks given the same slices share one list of ranges (see :func:`redistribute`):
    every subtask of a UNION state, the subtasks of one BROADCAST partition or one
    broadcast state's partition. The plan costs O(ranges + new parallelism), and its
    lists are read-only.
    """
    partitioned = [*operator.list_states, *operator.broadcast_states]
    states: dict[str, tuple[DistributionMode, list[int]]] = {}
    for st in partitioned:
        counts = [sum(r.count for r in p.ranges) for p in st.partitions]
        states[st.name] = (DistributionMode(st.mode if isinstance(st, pb.ListState) else pb.BROADCAST), counts)
    slices = redistribute(states, operator.parallelism, new_parallelism)
    plan: dict[str, list[list[pb.ElementRange]]] = {}
    for st in partitioned:
        starts = [partition_starts(p) for p in st.partitions]
        located: dict[int, list[pb.ElementRange]] = {}  # by id of a slice list shared by several subtasks
        plan[st.name] = []
        for subtask in slices[st.name]:
            if id(subtask) not in located:
                located[id(subtask)] = [r for s in subtask for r in locate_in_partition(
                    st.partitions[s.partition], s.first, s.count, starts[s.partition])]
            plan[st.name].append(located[id(subtask)])
    return plan


def check_new_parallelism(operator: pb.Operator, parallelism: int) -> None:
    if isinstance(parallelism, Integral) and parallelism > operator.max_parallelism:  # else refused below
        raise InvalidArgumentError(
            f"operator {operator.operator_id!r} has max parallelism {operator.max_parallelism}, so it cannot run at "
            f"parallelism {parallelism}; change the max parallelism first (a rewrite of its keyed state)")
    check_parallelism(parallelism, operator.max_parallelism)


def every_operator_at(parallelism: int, max_parallelism: int) -> int:
    """The parallelism one number for every operator (``-p N``) gives an operator: ``N``, but a
    non-parallel operator (max parallelism 1: Flink's ``forceNonParallel``, a SQL job's global
    Top-N or sink) stays at 1, as in Flink; a job with one could not be rescaled by ``-p`` else."""
    return 1 if max_parallelism == 1 else parallelism


def resolve_parallelism(savepoint_operators: list[pb.Operator], parallelism: int | Mapping[str, int]) -> dict[str, int]:
    """New parallelism per operator: one number for all (:func:`every_operator_at`), or a map
    (unlisted operators keep theirs)."""
    if isinstance(parallelism, Mapping):
        known = {op.operator_id for op in savepoint_operators}
        unknown = sorted(set(parallelism) - known)
        if unknown:
            raise unknown_names("operators", unknown, [op.operator_id for op in savepoint_operators])
        result = {op.operator_id: parallelism.get(op.operator_id, op.parallelism) for op in savepoint_operators}
    else:
        result = {op.operator_id: every_operator_at(parallelism, op.max_parallelism) for op in savepoint_operators}
    for op in savepoint_operators:
        check_new_parallelism(op, result[op.operator_id])
    return result


@dataclass(frozen=True)
class SubtaskSummary:
    """What one new subtask restores: its key groups, its list elements and broadcast
    entries per state, and the stored bytes it reads."""

    subtask: int
    first_key_group: int
    last_key_group: int
    planned_bytes: int
    list_states: dict[str, int]
    broadcast_states: dict[str, int]


@dataclass(frozen=True)
class OperatorPlanSummary:
    operator_id: str
    from_parallelism: int
    to_parallelism: int
    subtasks: list[SubtaskSummary]


@dataclass(frozen=True)
class PlanSummary:
    """A restore plan in numbers (``pyref plan``); ``to_dict()`` is its JSON."""

    location: str
    operators: list[OperatorPlanSummary]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(repr=False)
class OperatorPlan:
    operator: OperatorView
    parallelism: int
    list_ranges: dict[str, list[list[pb.ElementRange]]]

    def element_counts(self, name: str) -> list[int]:
        """Elements of list (or broadcast) state ``name`` each subtask restores; a list shared
        by many subtasks (UNION, BROADCAST, broadcast state) is counted once."""
        counted: dict[int, int] = {}
        for ranges in self.list_ranges[name]:
            if id(ranges) not in counted:
                counted[id(ranges)] = sum(r.count for r in ranges)
        return [counted[id(ranges)] for ranges in self.list_ranges[name]]

    def __repr__(self) -> str:
        return (f"<OperatorPlan {self.operator.operator_id!r} parallelism {self.operator.parallelism} -> "
                f"{self.parallelism}>")

    def summary(self) -> OperatorPlanSummary:
        """Per new subtask: key groups, list elements and broadcast entries per state (one count per
        list shared by many subtasks), stored bytes to read."""
        counts = {name: self.element_counts(name) for name in self.operator.list_state_names}
        entries = {name: self.element_counts(name) for name in self.operator.broadcast_state_names}
        firsts, lasts = key_group_bounds(self.operator.max_parallelism, self.parallelism)
        subtasks = [SubtaskSummary(i, int(firsts[i]), int(lasts[i]), int(self.planned_bytes[i]),
                                   {name: n[i] for name, n in counts.items()},
                                   {name: n[i] for name, n in entries.items()}) for i in range(self.parallelism)]
        return OperatorPlanSummary(self.operator.operator_id, self.operator.parallelism, self.parallelism, subtasks)

    def keyed_view(self, name: str) -> KeyedStateView:
        """The keyed state as stored (one view per plan: it indexes the chunks by key group)."""
        views = self.__dict__.setdefault("_keyed_views", {})
        if name not in views:
            views[name] = self.operator.keyed_state(name)
        return views[name]

    def timer_view(self, name: str, domain: str | None = None) -> TimerServiceView:
        """Format 1.2: a timer service as stored (one view per plan, like :meth:`keyed_view`)."""
        service = find_timer_service(self.operator.proto, name, domain)
        views = self.__dict__.setdefault("_timer_views", {})
        if (service.name, service.domain) not in views:
            op = self.operator
            views[service.name, service.domain] = TimerServiceView(op._store, op.proto, op._keys(), service)
        return views[service.name, service.domain]

    @cached_property
    def planned_bytes(self) -> np.ndarray:
        """Stored bytes of the chunks each subtask reads (inline chunks count zero: they
        come with the manifest), for every subtask at once in O(chunks + parallelism):
        prefix sums over the key-group-ordered chunks of keyed states and (1.2) timer
        services, one sum per distinct list of ranges of list and (1.2) broadcast states."""
        op = self.operator.proto
        total = np.zeros(self.parallelism, dtype=np.int64)
        firsts, lasts = key_group_bounds(op.max_parallelism, self.parallelism)
        key_grouped = [*((ks.chunks, self.keyed_view(ks.name)) for ks in op.keyed_states),
                       *((ts.chunks, self.timer_view(ts.name, ts.domain)) for ts in op.timer_services)]
        for chunks, view in key_grouped:
            stored = np.fromiter((_stored_length(c) for c in chunks), dtype=np.int64, count=len(chunks))
            ends = np.concatenate([[0], np.cumsum(stored)])
            groups = view.chunk_key_groups
            total += ends[np.searchsorted(groups, lasts, side="right")] - ends[np.searchsorted(groups, firsts)]
        for st in [*op.list_states, *op.broadcast_states]:
            summed: dict[int, int] = {}
            for i, ranges in enumerate(self.list_ranges[st.name]):
                if id(ranges) not in summed:
                    summed[id(ranges)] = sum(_stored_length(st.chunks[c]) for c in {r.chunk for r in ranges})
                total[i] += summed[id(ranges)]
        return total


class RestorePlan:
    def __init__(self, savepoint: Savepoint, parallelism: int | Mapping[str, int]) -> None:
        self.savepoint = savepoint
        savepoint.store.check_before_reading()  # a plan is a read of the state (spec/format.md §5.10)
        wanted = resolve_parallelism(list(savepoint.manifest.operators), parallelism)
        self.operators: dict[str, OperatorPlan] = {}
        for op in savepoint.operators:
            p = wanted[op.operator_id]
            self.operators[op.operator_id] = OperatorPlan(op, p, plan_list_state(op.proto, p))

    def __repr__(self) -> str:
        changes = sorted({f"{p.operator.parallelism} -> {p.parallelism}" for p in self.operators.values()})
        return (f"<RestorePlan {self.savepoint.location}: {len(self.operators)} operators, parallelism "
                f"{', '.join(changes)}>")

    def summary(self) -> PlanSummary:
        """Who restores what, in numbers: :class:`PlanSummary` (reads no state bytes)."""
        return PlanSummary(self.savepoint.location, [p.summary() for p in self.operators.values()])

    def subtask(self, operator_id: str, index: int) -> SubtaskRestore:
        if operator_id not in self.operators:
            raise unknown_names("operators", [operator_id], self.operators)
        plan = self.operators[operator_id]
        if not 0 <= index < plan.parallelism:
            raise InvalidArgumentError(f"subtask {index} outside parallelism {plan.parallelism} of {operator_id!r}")
        return SubtaskRestore(plan, index)

    def subtasks(self, operator_id: str) -> list[SubtaskRestore]:
        return [self.subtask(operator_id, i) for i in range(self.operators[operator_id].parallelism)]


class SubtaskRestore:
    """One new subtask's share: its key-group range and its list elements."""

    def __init__(self, plan: OperatorPlan, index: int) -> None:
        self._plan = plan
        self.operator_id = plan.operator.operator_id
        self.index = index
        self.parallelism = plan.parallelism
        self.key_group_range: KeyGroupRange = key_group_range(plan.operator.max_parallelism, plan.parallelism, index)

    def __repr__(self) -> str:
        r = self.key_group_range
        return (f"<SubtaskRestore {self.operator_id!r} subtask {self.index} of {self.parallelism}: "
                f"key groups {r.first}-{r.last}>")

    def list_ranges(self, name: str) -> list[pb.ElementRange]:
        if name not in self._plan.list_ranges:
            raise InvalidArgumentError("no such list or broadcast state", state=f"{self.operator_id}/{name}")
        return self._plan.list_ranges[name][self.index]

    def _list_view(self, name: str, serializer: Serializer | None) -> ListStateView:
        return self._plan.operator.list_state(name, serializer)

    def list_state(self, name: str, serializer: Serializer | None = None) -> Iterator[Any]:
        """This subtask's elements of a list state, decoded lazily."""
        return self._list_view(name, serializer).iter_ranges(self.list_ranges(name))

    def list_arrow(self, name: str, serializer: Serializer | None = None) -> pa.Array:
        return self._list_view(name, serializer).arrow_ranges(self.list_ranges(name))

    def _keyed_view(self, name: str, value_serializer: Serializer | None) -> KeyedStateView:
        if value_serializer is None:
            return self._plan.keyed_view(name)
        return self._plan.operator.keyed_state(name, value_serializer)

    def keyed_chunks(self, name: str) -> list[pb.Chunk]:
        return self._keyed_view(name, None).chunks_in(self.key_group_range)

    def keyed_state(self, name: str, value_serializer: Serializer | None = None) -> Iterator[tuple[Any, ...]]:
        """This subtask's entries of a keyed state, decoded lazily."""
        view = self._keyed_view(name, value_serializer)
        return view.iter_chunks(view.chunks_in(self.key_group_range))

    def keyed_arrow(self, name: str, value_serializer: Serializer | None = None) -> pa.Table:
        view = self._keyed_view(name, value_serializer)
        return view.arrow_chunks(view.chunks_in(self.key_group_range))

    def _timer_view(self, name: str, domain: str | None) -> TimerServiceView:
        return self._plan.timer_view(name, domain)

    def timer_chunks(self, name: str, domain: str | None = None) -> list[pb.Chunk]:
        """Format 1.2: the chunks of this subtask's timers of a service: those of its key groups."""
        return self._timer_view(name, domain).chunks_in(self.key_group_range)

    def timers(self, name: str, domain: str | None = None) -> Iterator[tuple[Any, ...]]:
        """Format 1.2: this subtask's distinct timers of a service, (key, [namespace], timestamp):
        the timers of its key groups (spec/format.md §7.9)."""
        view = self._timer_view(name, domain)
        return view.iter_chunks(view.chunks_in(self.key_group_range))

    def timers_arrow(self, name: str, domain: str | None = None) -> pa.Table:
        view = self._timer_view(name, domain)
        return view.arrow_chunks(view.chunks_in(self.key_group_range))

    def broadcast_ranges(self, name: str) -> list[pb.ElementRange]:
        """Format 1.2: the rows of the broadcast state's map this subtask restores."""
        return self.list_ranges(name)

    def broadcast_state(self, name: str) -> dict[Any, Any]:
        """Format 1.2: this subtask's copy of a broadcast map (old partition ``index mod old_p``)."""
        view = self._plan.operator.broadcast_state(name)
        return view.map_of(self.broadcast_ranges(name))

    def broadcast_arrow(self, name: str) -> pa.Table:
        return self._plan.operator.broadcast_state(name).arrow_ranges(self.broadcast_ranges(name))

    def planned_bytes(self) -> int:
        """Stored bytes of every chunk this subtask reads (inline chunks count zero: they come with the manifest)."""
        return int(self._plan.planned_bytes[self.index])


def _stored_length(chunk: pb.Chunk) -> int:
    return chunk.range.length if chunk.WhichOneof("location") == "range" else 0
