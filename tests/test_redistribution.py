"""Operator list-state redistribution: the spec's vectors (Flink 2.3.0 and the
multi-SPLIT-state transcription), run verbatim, and property tests over
chains of rescalings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyref.errors import InvalidArgumentError
from pyref.redistribution import (
    DistributionMode,
    ElementSlice,
    expand_to_elements,
    redistribute,
    split_state_order,
)

VECTORS = Path(__file__).resolve().parents[1] / "spec" / "vectors"
VECTOR_FILES = ["flink-operator-state-redistribution.json", "redistribution-multi-split.json"]
CASES = [
    pytest.param(case, id=f"{name}#{i}:{case['old_parallelism']}->{case['new_parallelism']}")
    for name in VECTOR_FILES
    for i, case in enumerate(json.loads((VECTORS / name).read_text(encoding="utf-8"))["cases"])
]

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SPLIT, UNION, BROADCAST = DistributionMode.SPLIT_DISTRIBUTE, DistributionMode.UNION, DistributionMode.BROADCAST


# ---------------------------------------------------------------------------
# Vectors, verbatim
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_vector_case(case: dict) -> None:
    states = {
        s["name"]: (DistributionMode[s["mode"]], s["elements_per_old_subtask"]) for s in case["states"]
    }
    result = redistribute(states, case["old_parallelism"], case["new_parallelism"])
    assert list(result) == list(case["assignment"])
    for name, per_subtask in case["assignment"].items():
        assert len(result[name]) == case["new_parallelism"]
        got = {str(i): [list(e) for e in sorted(expand_to_elements(slices))] for i, slices in enumerate(result[name])}
        assert got == per_subtask, name
    if "split_state_order" in case:
        split_names = [s["name"] for s in case["states"] if s["mode"] == "SPLIT_DISTRIBUTE"]
        assert split_state_order(split_names) == case["split_state_order"]


def test_mode_values_match_protobuf() -> None:
    from pyref._proto.savepoint.v1 import manifest_pb2  # type: ignore[import-not-found]

    for mode in DistributionMode:
        assert manifest_pb2.DistributionMode.Value(mode.name) == mode.value


# ---------------------------------------------------------------------------
# Hand-checked behaviour
# ---------------------------------------------------------------------------


def test_worked_example_slices() -> None:
    # spec/redistribution.md, example 1 (3 -> 2).
    result = redistribute({"a": (SPLIT, [5, 0, 2]), "u": (UNION, [1, 0, 2]), "b": (BROADCAST, [3, 3, 3])}, 3, 2)
    assert result["a"] == [[ElementSlice(0, 0, 4)], [ElementSlice(0, 4, 1), ElementSlice(2, 0, 2)]]
    assert result["u"] == [[ElementSlice(0, 0, 1), ElementSlice(2, 0, 2)]] * 2
    assert result["b"] == [[ElementSlice(0, 0, 3)], [ElementSlice(1, 0, 3)]]


def test_worked_example_rotation() -> None:
    # spec/redistribution.md, example 2: the start subtask rotates across SPLIT states.
    result = redistribute({"c": (SPLIT, [1, 1]), "a": (SPLIT, [2, 2]), "b": (SPLIT, [2, 2])}, 2, 3)
    assert result["a"] == [[ElementSlice(0, 0, 2)], [ElementSlice(1, 0, 1)], [ElementSlice(1, 1, 1)]]
    assert result["b"] == [[ElementSlice(1, 1, 1)], [ElementSlice(0, 0, 2)], [ElementSlice(1, 0, 1)]]
    assert result["c"] == [[ElementSlice(1, 0, 1)], [], [ElementSlice(0, 0, 1)]]


def test_split_state_order_is_utf8_bytewise() -> None:
    names = ["\U0001F600", "\uff61", "ab", "a", "B", "", "z"]
    assert split_state_order(names) == ["", "B", "a", "ab", "z", "\uff61", "\U0001F600"]


def test_union_partitions_independent_of_parallelism() -> None:
    # A union state stored once may have any number of partitions.
    result = redistribute({"u": (UNION, [2, 0, 1, 0, 3])}, 2, 3)
    expected = [ElementSlice(0, 0, 2), ElementSlice(2, 0, 1), ElementSlice(4, 0, 3)]
    assert result["u"] == [expected] * 3
    assert redistribute({"u": (UNION, [])}, 4, 4)["u"] == [[]] * 4


def test_huge_counts_are_sliced_not_expanded() -> None:
    counts = [10**12, 3, 0, 10**12 + 7]
    result = redistribute({"s": (SPLIT, counts)}, 4, 3)
    sizes = [sum(s.count for s in slices) for slices in result["s"]]
    assert sum(sizes) == sum(counts) and max(sizes) - min(sizes) <= 1
    assert sum(len(slices) for slices in result["s"]) <= len(counts) + 3


def test_int_modes_and_empty_input() -> None:
    assert redistribute({"s": (1, [1, 1])}, 2, 1) == {"s": [[ElementSlice(0, 0, 1), ElementSlice(1, 0, 1)]]}
    assert redistribute({}, 3, 5) == {}


def test_expand_to_elements() -> None:
    assert expand_to_elements([ElementSlice(2, 3, 2), ElementSlice(0, 0, 1)]) == [(2, 3), (2, 4), (0, 0)]
    assert expand_to_elements([]) == []


@pytest.mark.parametrize(
    "states, old, new",
    [
        ({"s": (SPLIT, [1, 2])}, 3, 2),
        ({"b": (BROADCAST, [1, 1, 1])}, 2, 2),
        ({"s": (SPLIT, [1, -1])}, 2, 3),
        ({"s": (SPLIT, [1, 1.5])}, 2, 3),
        ({"s": (0, [1, 1])}, 2, 3),
        ({"s": (4, [1, 1])}, 2, 3),
        ({"s": (SPLIT,)}, 2, 3),
        ({"s": SPLIT}, 2, 3),
        ({1: (SPLIT, [1, 1])}, 2, 3),
        ({"\ud800": (SPLIT, [1, 1])}, 2, 3),
        ({"s": (SPLIT, [1, 1])}, 2, 0),
        ({"s": (SPLIT, [1])}, 0, 1),
        ({"s": (SPLIT, [1])}, 1, 32769),
        ({"s": (SPLIT, [1])}, True, 2),
    ],
)
def test_invalid_arguments(states: Any, old: Any, new: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        redistribute(states, old, new)


def test_error_names_the_state() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        redistribute({"offsets": (SPLIT, [1])}, 2, 3)
    assert info.value.state == "offsets" and "old_parallelism=2" in str(info.value)


# ---------------------------------------------------------------------------
# Properties over chains of rescalings p1 -> p2 -> p3
# ---------------------------------------------------------------------------

parallelisms = st.integers(1, 9)
counts_lists = lambda n: st.lists(st.integers(0, 12), min_size=n, max_size=n)  # noqa: E731


@st.composite
def operator_states(draw: st.DrawFn, old_parallelism: int) -> dict[str, tuple[DistributionMode, list[int]]]:
    names = draw(st.lists(st.text(alphabet="abAB\u00e9\U0001F600", min_size=1, max_size=3), min_size=1, max_size=5, unique=True))
    states = {}
    for name in names:
        mode = draw(st.sampled_from(list(DistributionMode)))
        if mode is UNION:
            counts = draw(st.lists(st.integers(0, 12), max_size=6))
        elif mode is BROADCAST:
            counts = [draw(st.integers(0, 12))] * old_parallelism
        else:
            counts = draw(counts_lists(old_parallelism))
        states[name] = (mode, counts)
    return states


def all_elements(counts: list[int]) -> list[tuple[int, int]]:
    return [(p, i) for p, n in enumerate(counts) for i in range(n)]


def check_and_rebuild(
    states: dict[str, tuple[DistributionMode, list[int]]], old: int, new: int
) -> dict[str, tuple[DistributionMode, list[int]]]:
    """Check one redistribution and return the states as the new subtasks
    would store them in the next savepoint."""
    result = redistribute(states, old, new)
    assert list(result) == list(states)
    rebuilt = {}
    for name, (mode, counts) in states.items():
        per_subtask = result[name]
        assert len(per_subtask) == new
        for slices in per_subtask:
            assert all(s.count > 0 for s in slices)
        expanded = [expand_to_elements(slices) for slices in per_subtask]
        if mode is SPLIT:
            flat = [e for elements in expanded for e in elements]
            # Nothing lost, nothing duplicated.
            assert sorted(flat) == all_elements(counts)
            order = {e: k for k, e in enumerate(all_elements(counts))}
            for elements in expanded:
                # Each subtask restores one contiguous run, in order.
                positions = [order[e] for e in elements]
                if positions:
                    assert positions == list(range(positions[0], positions[0] + len(positions)))
            sizes = [len(elements) for elements in expanded]
            if old == new:
                assert expanded == [[(i, k) for k in range(n)] for i, n in enumerate(counts)]
            else:
                assert max(sizes) - min(sizes) <= 1
            rebuilt[name] = (mode, sizes)
        elif mode is UNION:
            # Everything to everyone, in partition order; stored once again.
            assert all(elements == all_elements(counts) for elements in expanded)
            rebuilt[name] = (mode, counts)
        else:
            # Exactly one full copy per subtask: old subtask i % old (i itself if unchanged).
            for i, elements in enumerate(expanded):
                source = i % old
                assert elements == [(source, k) for k in range(counts[source])]
            rebuilt[name] = (mode, [counts[i % old] for i in range(new)])
    return rebuilt


@PROPERTY
@given(st.data(), parallelisms, parallelisms, parallelisms)
def test_rescaling_chain(data: st.DataObject, p1: int, p2: int, p3: int) -> None:
    states = data.draw(operator_states(p1))
    states = check_and_rebuild(states, p1, p2)
    check_and_rebuild(states, p2, p3)


@PROPERTY
@given(st.data(), parallelisms)
def test_unchanged_parallelism_keeps_state_in_place(data: st.DataObject, p: int) -> None:
    states = data.draw(operator_states(p))
    result = redistribute(states, p, p)
    for name, (mode, counts) in states.items():
        if mode is UNION:
            continue
        assert [expand_to_elements(s) for s in result[name]] == [[(i, k) for k in range(n)] for i, n in enumerate(counts)]
