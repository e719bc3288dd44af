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


def _union_and_broadcast(path, partitions: int) -> None:
    from pyref import DistributionMode, SavepointWriter
    from pyref.serializers import Int64

    with SavepointWriter(str(path), inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=partitions, max_parallelism=1024)
        union = op.list_state("union", Int64(), DistributionMode.UNION)
        broadcast = op.list_state("broadcast", Int64(), DistributionMode.BROADCAST)
        for i in range(partitions):
            union.add(i, [i, i + 1])
            broadcast.add(i, [7, 8])


def test_union_and_broadcast_plans_share_one_list_per_distinct_share(tmp_path, monkeypatch):
    """Issue 9, item 14: the UNION plan was copied per new subtask (2000 -> 2000 took
    66 s and 2.4 GiB); subtasks that restore the same elements now share one list."""
    from pyref import restore, rescale

    _union_and_broadcast(tmp_path / "sp", 20)
    calls = []
    locate = restore.locate_in_partition
    monkeypatch.setattr(restore, "locate_in_partition", lambda *a, **k: calls.append(a) or locate(*a, **k))
    plan = Savepoint.open(tmp_path / "sp").restore_plan(500)
    union = plan.operators["op"].list_ranges["union"]
    assert len({id(ranges) for ranges in union}) == 1 and len(union[0]) == 20
    assert len({id(ranges) for ranges in plan.operators["op"].list_ranges["broadcast"]}) == 20
    assert len(calls) == 20 + 20  # one per partition of each state, not per new subtask
    assert [sorted(plan.subtask("op", i).list_state("union")) for i in (0, 499)] == [sorted(
        [*range(20), *range(1, 21)])] * 2
    assert plan.operators["op"].element_counts("union") == [40] * 500
    calls.clear()
    rescaled = rescale(tmp_path / "sp", tmp_path / "sp2", 500)  # keeps UNION partitions as written
    assert len(calls) <= 20 + 20 and rescaled.operators[0].list_state(rescaled.operators[0].list_state_names[0]
                                                                       ).partition_count == 20


def test_planned_bytes_index_the_chunks_once_for_all_subtasks(tmp_path, monkeypatch):
    """Issue 9, item 15: `plan -p N` cost N x chunks (each subtask re-indexed every chunk).
    All subtasks' planned bytes now come from one index of the chunks, and equal the
    stored bytes of the chunks in each subtask's key groups."""
    from pyref import reader

    write_seeds(tmp_path / "sp", inline_bytes=0, chunk_bytes=64)
    sp = Savepoint.open(tmp_path / "sp")
    views = []
    init = reader.KeyedStateView.__init__
    monkeypatch.setattr(reader.KeyedStateView, "__init__", lambda self, *a, **k: views.append(1) or init(self, *a, **k))
    plan = sp.restore_plan({"url-counter": 7})
    planned = [sub.planned_bytes() for sub in plan.subtasks("url-counter")]
    assert [len(sub.keyed_chunks("count")) for sub in plan.subtasks("url-counter")]
    assert len(views) == 1  # one keyed state, indexed once for every subtask
    chunks = sp.operator("url-counter").proto.keyed_states[0].chunks
    assert planned == [sum(c.range.length for c in chunks if c.key_group in key_group_range(128, 7, i))
                       for i in range(7)]
    assert sum(planned) == sum(c.range.length for c in chunks) > 0


def _every_1_2_part(path, parallelism: int, max_parallelism: int = 128) -> None:
    """Keyed state, timers and a broadcast state (a shared map and each subtask's own
    entries) in small chunks of a data file."""
    from pyref import SavepointWriter
    from pyref.serializers import Int64, String

    keys = [f"k{i}" for i in range(200)]
    with SavepointWriter(str(path), inline_bytes=0, chunk_bytes=64) as w:
        op = w.add_operator("op", parallelism=parallelism, max_parallelism=max_parallelism, key_serializer=String())
        op.keyed_state("v", Int64()).add(keys, list(range(200)))
        op.timer_service("t", "event_time").add(keys, list(range(200)))
        rules = op.broadcast_state("rules", String(), Int64())
        rules.add_all([f"shared-{i}" for i in range(30)], list(range(30)))
        for i in range(parallelism):
            rules.add(i, [f"own-{i}"], [i])


def test_broadcast_state_plans_share_one_list_per_old_partition(tmp_path, monkeypatch):
    """A broadcast state is planned like a BROADCAST list state: new subtask i takes old
    partition i mod old_p, and the subtasks of one old partition share its list."""
    from pyref import restore

    _every_1_2_part(tmp_path / "sp", 20, max_parallelism=1024)
    calls = []
    locate = restore.locate_in_partition
    monkeypatch.setattr(restore, "locate_in_partition", lambda *a, **k: calls.append(a) or locate(*a, **k))
    plan = Savepoint.open(tmp_path / "sp").restore_plan(500)
    lists = plan.operators["op"].list_ranges["rules"]
    assert len({id(ranges) for ranges in lists}) == 20 and all(lists[i] is lists[i % 20] for i in range(500))
    assert len(calls) == 20  # one per old partition, not per new subtask
    assert plan.operators["op"].element_counts("rules") == [31] * 500
    assert plan.subtask("op", 487).broadcast_state("rules") == {**{f"shared-{i}": i for i in range(30)}, "own-7": 7}


def test_planned_bytes_count_timer_and_broadcast_chunks(tmp_path, monkeypatch):
    """Timer chunks are planned by key group like keyed chunks (prefix sums, one index of
    the service for every subtask); broadcast chunks count once per chunk a subtask's map
    refers to, the shared ones included."""
    from pyref import timers

    _every_1_2_part(tmp_path / "sp", 3)
    sp = Savepoint.open(tmp_path / "sp")
    views = []
    init = timers.TimerServiceView.__init__
    monkeypatch.setattr(timers.TimerServiceView, "__init__", lambda self, *a, **k: views.append(1) or init(self, *a, **k))
    plan = sp.restore_plan(7)
    planned = [sub.planned_bytes() for sub in plan.subtasks("op")]
    assert len(views) == 1  # one timer service, indexed once for every subtask
    op = sp.operator("op").proto
    (keyed,), (service,), (rules,) = op.keyed_states, op.timer_services, op.broadcast_states
    assert len(service.chunks) > 7 and len(rules.chunks) > 3
    expected = []
    for i in range(7):
        groups = key_group_range(128, 7, i)
        old = rules.partitions[i % 3]
        expected.append(sum(c.range.length for c in [*keyed.chunks, *service.chunks] if c.key_group in groups)
                        + sum(rules.chunks[c].range.length for c in {r.chunk for r in old.ranges}))
    assert planned == expected
    assert [sub.timer_chunks("t") for sub in plan.subtasks("op")] != [[]] * 7
