"""Restore plans: every new subtask gets its key groups and list elements by Flink's rules."""

from __future__ import annotations

import pytest

from pyref.testing import write_seeds
from pyref import InvalidArgumentError, Savepoint, assign_to_key_group, key_group_range


def test_kafka_offsets_scale_in_to_one_subtask(seeds):
    plan = Savepoint.open(seeds).restore_plan(1)
    assert sorted(plan.subtask("kafka-source", 0).list_state("offsets")) == [100, 101, 200, 201]


def test_kafka_offsets_scale_out_leaves_no_subtask_idle(seeds):
    plan = Savepoint.open(seeds).restore_plan(4)
    held = [list(plan.subtask("kafka-source", i).list_state("offsets")) for i in range(4)]
    assert held == [[100], [101], [200], [201]]


def test_unchanged_parallelism_keeps_state_in_place(seeds):
    plan = Savepoint.open(seeds).restore_plan(2)
    assert [list(s.list_state("offsets")) for s in plan.subtasks("kafka-source")] == [[100, 101], [200, 201]]


@pytest.mark.parametrize("parallelism", [1, 2, 3, 4, 7])
def test_keyed_entries_land_on_the_subtask_owning_their_key_group(seeds, parallelism):
    sp = Savepoint.open(seeds)
    plan = sp.restore_plan({"url-counter": parallelism})
    seen = {}
    for sub in plan.subtasks("url-counter"):
        for url, count in sub.keyed_state("count"):
            group = assign_to_key_group(url, 128)
            assert group in key_group_range(128, parallelism, sub.index)
            seen[url] = count
    assert seen == {f"/page/{i}": i for i in range(50)}


def test_subtask_reads_only_its_share(tmp_path):
    write_seeds(tmp_path / "sp", inline_bytes=0, chunk_bytes=64)
    sp = Savepoint.open(tmp_path / "sp")
    plan = sp.restore_plan({"url-counter": 4})
    total = 0
    for sub in plan.subtasks("url-counter"):
        before = sp.store.bytes_read
        list(sub.keyed_state("count"))
        assert sp.store.bytes_read - before == sub.planned_bytes()
        total += sub.planned_bytes()
    keyed = sp.operator("url-counter").proto.keyed_states[0]
    assert total == sum(c.range.length for c in keyed.chunks) > 0


def test_parallelism_above_max_parallelism_is_refused(seeds):
    with pytest.raises(InvalidArgumentError, match="max parallelism 128"):
        Savepoint.open(seeds).restore_plan(129)


def test_unknown_operator_in_parallelism_map_is_refused(seeds):
    with pytest.raises(InvalidArgumentError, match="no such operators"):
        Savepoint.open(seeds).restore_plan({"nope": 2})
