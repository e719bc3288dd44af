"""Redistribution of operator list state on restore (Flink FLIP-8).

An operator list state is stored as *partitions* (one per old subtask for
SPLIT_DISTRIBUTE and BROADCAST, one per writing subtask for UNION), each an
ordered list of elements. On restore at some parallelism every new subtask is
given runs of those elements, computed here exactly as Flink's
``RoundRobinOperatorStateRepartitioner`` does, except for the one point where
Flink is not reproducible (the order in which SPLIT_DISTRIBUTE states are
visited, which we fix to the UTF-8 byte order of the state names).

The result is expressed as :class:`ElementSlice` runs, never per element, so
the cost is O(partitions + new parallelism) per state whatever the element
count. The normative text is ``spec/redistribution.md``.
"""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .errors import InvalidArgumentError
from .key_groups import UPPER_BOUND_MAX_PARALLELISM

__all__ = ["DistributionMode", "ElementSlice", "redistribute", "split_state_order", "expand_to_elements"]


class DistributionMode(enum.IntEnum):
    """How a list state is redistributed; the values are those of the
    protobuf enum ``savepoint.v1.DistributionMode``."""

    SPLIT_DISTRIBUTE = 1
    UNION = 2
    BROADCAST = 3

    @classmethod
    def parse(cls, mode: DistributionMode | int | str) -> DistributionMode:
        """A mode from itself, its number or its name (any case: ``"union"``)."""
        if isinstance(mode, str) and mode.upper() in cls.__members__:
            return cls[mode.upper()]
        if isinstance(mode, int) and not isinstance(mode, bool) and mode in cls._value2member_map_:
            return cls(mode)
        raise InvalidArgumentError(f"unknown distribution mode {mode!r}; choose one of {list(cls.__members__)}")


@dataclass(frozen=True)
class ElementSlice:
    """``count`` consecutive elements of old partition ``partition``,
    starting at element index ``first``."""

    partition: int
    first: int
    count: int


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}") from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InvalidArgumentError(f"{name}={value} is out of range: it must be {bound}")
    return value


def _name_key(name: str) -> bytes:
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"state name {name!r} is not valid Unicode text") from None


def split_state_order(names: Sequence[str]) -> list[str]:
    """SPLIT_DISTRIBUTE state names in the order they are redistributed:
    ascending by the UTF-8 bytes of the name, compared bytewise (unsigned).

    Flink uses java.util.HashMap iteration order, which depends on Java's
    String.hashCode and the map's capacity and cannot be reproduced portably;
    UTF-8 byte order is what every language's byte-string sort gives.
    """
    return sorted(names, key=_name_key)


def _whole_partitions(counts: Sequence[int]) -> list[ElementSlice]:
    # Empty partitions contribute no slice: a slice always holds >= 1 element.
    return [ElementSlice(p, 0, n) for p, n in enumerate(counts) if n]


def _split(counts: Sequence[int], new_parallelism: int, start: int) -> tuple[list[list[ElementSlice]], int]:
    """One SPLIT_DISTRIBUTE state at a changed parallelism; returns the
    slices per new subtask and the start subtask of the next state.

    Mirrors Flink's repartitionSplitState loop: the elements, concatenated
    in (partition, element) order, are cut into ``new_parallelism``
    contiguous runs; visiting subtasks from ``start`` onwards, the first
    ``total % new_parallelism`` get one extra element. The next state
    starts where the extras ended, so extras spread over subtasks.
    """
    total = sum(counts)
    base, remainder = divmod(total, new_parallelism)
    result: list[list[ElementSlice]] = [[] for _ in range(new_parallelism)]
    new_start = start
    partition = 0  # cursor: next element is (partition, offset)
    offset = 0
    for i in range(new_parallelism):
        subtask = (i + start) % new_parallelism
        wanted = base
        if remainder > 0:
            wanted += 1
            remainder -= 1
        elif remainder == 0:
            # Out of extras: the next state's round begins at this subtask.
            new_start = subtask
            remainder -= 1
        slices = result[subtask]
        while wanted > 0:
            available = counts[partition] - offset
            if available == 0:  # empty or exhausted partition
                partition += 1
                offset = 0
                continue
            take = min(available, wanted)
            slices.append(ElementSlice(partition, offset, take))
            wanted -= take
            offset += take
            if offset == counts[partition]:
                partition += 1
                offset = 0
    return result, new_start


def redistribute(
    states: Mapping[str, tuple[DistributionMode, Sequence[int]]],
    old_parallelism: int,
    new_parallelism: int,
) -> dict[str, list[list[ElementSlice]]]:
    """Assign the elements of an operator's list states to new subtasks.

    ``states`` maps each state name to its mode and its element count per
    partition. Returns, per state (in the input's order), for each new
    subtask ``0..new_parallelism-1`` the slices it restores, in restore order.

    Subtasks that restore the same slices share one list (every subtask of a
    UNION state; the subtasks of one old BROADCAST partition), so the result
    stays O(partitions + new parallelism): treat the lists as read-only.
    """
    old_parallelism = _check_int("old_parallelism", old_parallelism, 1, UPPER_BOUND_MAX_PARALLELISM)
    new_parallelism = _check_int("new_parallelism", new_parallelism, 1, UPPER_BOUND_MAX_PARALLELISM)

    checked: dict[str, tuple[DistributionMode, list[int]]] = {}
    for name, spec in states.items():
        if not isinstance(name, str):
            raise InvalidArgumentError(f"state name must be a string, got {name!r}")
        _name_key(name)
        try:
            raw_mode, raw_counts = spec
        except (TypeError, ValueError):
            raise InvalidArgumentError(
                "expected (mode, element counts per partition)", state=name
            ) from None
        try:
            mode = DistributionMode(raw_mode)
        except ValueError:
            raise InvalidArgumentError(f"invalid distribution mode {raw_mode!r}", state=name) from None
        counts = [_check_int("element count", n, 0) for n in raw_counts]
        if mode is not DistributionMode.UNION and len(counts) != old_parallelism:
            # Partition i is what old subtask i held; UNION partitions are
            # instead the subtasks that wrote elements, stored once.
            raise InvalidArgumentError(
                f"a {mode.name} state needs exactly old_parallelism={old_parallelism} "
                f"partitions, got {len(counts)}",
                state=name,
            )
        checked[name] = (mode, counts)

    result: dict[str, list[list[ElementSlice]]] = {}
    if old_parallelism == new_parallelism:
        # Flink returns the old assignment unchanged; UNION state is still
        # given whole to every subtask.
        for name, (mode, counts) in checked.items():
            if mode is DistributionMode.UNION:
                result[name] = [_whole_partitions(counts)] * new_parallelism
            else:
                result[name] = [[ElementSlice(i, 0, n)] if n else [] for i, n in enumerate(counts)]
        return result

    split_results: dict[str, list[list[ElementSlice]]] = {}
    start = 0
    split_names = [name for name, (mode, _) in checked.items() if mode is DistributionMode.SPLIT_DISTRIBUTE]
    for name in split_state_order(split_names):
        split_results[name], start = _split(checked[name][1], new_parallelism, start)

    for name, (mode, counts) in checked.items():
        if mode is DistributionMode.SPLIT_DISTRIBUTE:
            result[name] = split_results[name]
        elif mode is DistributionMode.UNION:
            result[name] = [_whole_partitions(counts)] * new_parallelism
        else:  # BROADCAST: new subtask i takes old subtask i % old_parallelism.
            whole = [[ElementSlice(p, 0, n)] if n else [] for p, n in enumerate(counts)]
            result[name] = [whole[i % old_parallelism] for i in range(new_parallelism)]
    return result


def expand_to_elements(slices: Sequence[ElementSlice]) -> list[tuple[int, int]]:
    """The ``(old partition, element index)`` pairs the slices cover, in
    order. For tests and small tools only: it is O(elements)."""
    return [(s.partition, s.first + k) for s in slices for k in range(s.count)]
