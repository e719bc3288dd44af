"""Format 1.2 on Spark: bootstrap namespaced and TTL state, timers, broadcast and coordinator
state; read them as DataFrames; rescale and change the max parallelism with timers moving
with their keys."""

from __future__ import annotations

import hashlib

import pytest

from pyref import InvalidArgumentError, Savepoint, SavepointWriter
from pyref.inspection import verify
from pyref.key_groups import assign_to_key_group
from pyref.serializers import Int64, Opaque, String, TimeWindow, Window
from pyref.ttl import TtlConfig

pytestmark = pytest.mark.spark

USERS = [f"user-{i}" for i in range(40)]
#: Large and incompressible, so it goes to a data file, not inline (copies then copy its bytes).
COORDINATOR = b"".join(hashlib.sha256(bytes([i])).digest() for i in range(64))


def _window_rows(spark):
    rows = [(u, {"start": w * 60000, "end": (w + 1) * 60000}, i + w, 1000 + i) for i, u in enumerate(USERS)
            for w in range(3)]
    return spark.createDataFrame(rows, "user string, window struct<start: long, end: long>, n long, seen long")


@pytest.fixture(scope="module")
def bootstrapped(spark, tmp_path_factory):
    from pyref.spark import SavepointBuilder

    path = tmp_path_factory.mktemp("spark12") / "boot"
    rows = _window_rows(spark)
    with SavepointBuilder(spark, path) as b:
        b.add_operator("windows", 3, max_parallelism=32, key_serializer=String(), uid="windows-uid")
        b.add_keyed_state("windows", "count", rows, Int64(), namespace_serializer=TimeWindow(), key="user",
                          namespace="window", value="n", ttl=TtlConfig(60000), ttl_timestamp="seen")
        b.add_timers("windows", "window-timers", "event_time", rows.selectExpr("user", "window", "window.end - 1 AS t"),
                     namespace_serializer=TimeWindow(), key="user", namespace="window", timestamp="t")
        rules = spark.createDataFrame([("deny", "/admin"), ("allow", "*")], "k string, v string")
        b.add_broadcast_state("windows", "rules", rules, String(), String(), key="k", value="v")
        b.set_coordinator_state("windows", COORDINATOR)
    return path


def test_bootstrap_writes_every_1_2_part(bootstrapped):
    sp = Savepoint.open(bootstrapped)
    assert str(sp.version) == "1.2" and verify(sp).ok
    op = sp.operator("windows")
    assert (op.uid, op.coordinator_state) == ("windows-uid", COORDINATOR)
    assert op.proto.coordinator_state.HasField("range")
    assert op.keyed_state("count").get("user-3", namespace=Window(60000, 120000), with_ttl=True) == (4, 1003)
    assert len(list(op.timer_service("window-timers").timers())) == 120
    assert list(op.broadcast_state("rules").partitions()) == [{"deny": "/admin", "allow": "*"}] * 3


def test_namespace_ttl_timers_and_broadcast_as_dataframes(spark, bootstrapped):
    from pyref.spark import read_state

    count = spark.read.format("savepoint").option("operator", "windows").option("state", "count").load(
        str(bootstrapped))
    assert count.columns == ["key_group", "key", "namespace", "value", "ttl_timestamp"]
    row = count.filter("key = 'user-3' AND namespace.start = 60000").collect()[0]
    assert (row.value, row.ttl_timestamp) == (4, 1003)
    timers = read_state(spark, bootstrapped, "windows", timer_service="window-timers", target_parallelism=2)
    assert timers.columns == ["key_group", "key", "namespace", "timestamp", "subtask"]
    got = {(r.key, r.namespace.start, r.timestamp, r.subtask) for r in timers.collect()}
    assert len(got) == 120 and all(s == (0 if assign_to_key_group(k, 32, "string") < 16 else 1) for k, _, _, s in got)
    rules = spark.read.format("savepoint").option("operator", "windows").option("state", "rules").load(
        str(bootstrapped))
    assert sorted((r.subtask, r.key, r.value) for r in rules.collect()) == sorted(
        (i, k, v) for i in range(3) for k, v in (("deny", "/admin"), ("allow", "*")))


def test_rescale_copy_and_max_parallelism_move_timers_with_their_keys(spark, bootstrapped):
    from pyref.spark import change_max_parallelism, rescale

    copied = bootstrapped.parent / "copied"
    rescale(bootstrapped, copied, 2, spark=spark, copy=True, progress=False)
    sp = Savepoint.open(copied)
    assert verify(sp).ok and not sp.manifest.bases
    assert sp.operator("windows").coordinator_state == COORDINATOR
    assert list(sp.operator("windows").broadcast_state("rules").partitions()) == [{"deny": "/admin", "allow": "*"}] * 2
    wider = bootstrapped.parent / "wider"
    change_max_parallelism(spark, bootstrapped, wider, 128, progress=False)
    sp = Savepoint.open(wider)
    op = sp.operator("windows")
    assert op.max_parallelism == 128 and verify(sp).ok
    timers = list(op.timer_service("window-timers").timers())
    assert len(timers) == 120
    for sub in sp.restore_plan(5).subtasks("windows"):
        r = sub.key_group_range
        assert all(r.first <= assign_to_key_group(k, 128, "string") <= r.last for k, _, _ in sub.timers("window-timers"))
    assert op.keyed_state("count").get("user-3", namespace=Window(60000, 120000), with_ttl=True) == (4, 1003)
    assert op.coordinator_state == COORDINATOR


def test_max_parallelism_change_is_refused_for_writer_assigned_key_groups(spark, tmp_path):
    from pyref.spark import change_max_parallelism

    pojo = Opaque("flink", "com.example.Pojo")
    with SavepointWriter(str(tmp_path / "sp")) as w:
        # An import keeps Flink's key groups for every operator of the job, stateless ones too.
        w.add_operator("a-stateless-one", 2, max_parallelism=8, key_serializer=pojo, key_groups="writer")
        op = w.add_operator("op", 2, max_parallelism=8, key_serializer=pojo, key_groups="writer")
        op.keyed_state("v", Int64()).add([b"a", b"b"], [1, 2], key_groups=[1, 6])
    with pytest.raises(InvalidArgumentError, match="operator 'op': .*cannot change"):
        change_max_parallelism(spark, tmp_path / "sp", tmp_path / "wider", 16, progress=False)
    assert not (tmp_path / "wider" / "_manifest").exists()
    # An operator without keyed state or timers has no key to move: its max parallelism changes.
    wider = change_max_parallelism(spark, tmp_path / "sp", tmp_path / "wider", {"a-stateless-one": 16},
                                   progress=False)
    assert wider.operator("a-stateless-one").max_parallelism == 16


def test_commit_returns_the_savepoint_open(spark, tmp_path):
    """SavepointBuilder.commit() returns the savepoint it published, open, as the core writer's does."""
    from pyref.spark import SavepointBuilder

    builder = SavepointBuilder(spark, tmp_path / "c")
    builder.add_operator("op", 2, key_serializer=String())
    builder.add_keyed_state("op", "s", spark.createDataFrame([("a", 1), ("b", 2)], "key string, value long"), Int64())
    committed = builder.commit()
    assert isinstance(committed, Savepoint) and committed.info == Savepoint.open(tmp_path / "c").info
    assert committed.operator("op").keyed_state("s").get("b") == 2
