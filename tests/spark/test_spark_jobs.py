"""Redistribution and migration jobs on Spark, and the CLI that runs them."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from pyref import IncompatibleSerializerError, InvalidArgumentError, Savepoint, SavepointWriter
from pyref.cli import main
from pyref.inspection import describe, verify
from pyref.key_groups import assign_to_key_group
from pyref.serializers import Int32, Int64, ListOf, String

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """String- and int64-keyed value, map and list state beside a list state; small chunks."""
    path = tmp_path_factory.mktemp("jobs") / "keyed"
    with SavepointWriter(str(path), chunk_bytes=2048, file_bytes=32768) as w:
        op = w.add_operator("counter", parallelism=3, key_serializer=String())
        urls = [f"/page/{i}" for i in range(1000)]
        op.keyed_state("count", Int32()).add(urls, list(range(1000)))
        op.keyed_state("tags", Int64(), kind="map", user_key_serializer=String()).add(
            urls[:500], list(range(500)), [f"t{i % 7}" for i in range(500)])
        op.keyed_state("history", Int32(), kind="list").add(urls[:100], [[i, -i] for i in range(100)])
        op.list_state("buffer", Int32()).add(1, [5, 6, 7])
        users = w.add_operator("users", parallelism=2, key_serializer=Int64())
        users.keyed_state("age", Int32()).add(list(range(-500, 500)), [i % 90 for i in range(1000)])
    return path


def test_change_parallelism_writes_no_state_bytes(spark, keyed, tmp_path_factory):
    from pyref.spark import rescale

    target = keyed.parent / "p5"
    rescale(keyed, target, {"counter": 5})
    info = describe(Savepoint.open(target))
    assert info.data_bytes == 0 and not (target / "data").exists()
    plan = Savepoint.open(keyed).restore_plan({"counter": 5})
    sp = Savepoint.open(target)
    assert sp.operator("counter").parallelism == 5
    for sub in plan.subtasks("counter"):
        mine = sp.restore_plan(5).subtask("counter", sub.index)
        assert list(mine.keyed_state("count")) == list(sub.keyed_state("count"))
        assert list(mine.list_state("buffer")) == list(sub.list_state("buffer"))
    copied = tmp_path_factory.mktemp("copies") / "p1"
    rescale(keyed, copied, 1, spark=spark, copy=True, progress=False)
    one = Savepoint.open(copied)
    assert not one.manifest.bases and verify(one).ok
    assert list(one.restore_plan(1).subtask("counter", 0).list_state("buffer")) == [5, 6, 7]


# 128 -> 32768 and 128 -> 96 share 128 and 32 residue classes: written without a shuffle;
# 128 -> 7 shares none: shuffled by key group.
@pytest.mark.parametrize("max_parallelism", [32768, 96, 7])
def test_change_max_parallelism_moves_every_key_to_its_new_group(spark, keyed, max_parallelism):
    from pyref.spark import change_max_parallelism

    target = keyed.parent / f"mp{max_parallelism}"
    change_max_parallelism(spark, keyed, target, {"counter": max_parallelism, "users": max_parallelism},
                           partitions=3, progress=False)
    source, sp = Savepoint.open(keyed), Savepoint.open(target)
    assert verify(sp).ok
    for op_id, state, key_type in (("counter", "count", "string"), ("counter", "tags", "string"),
                                   ("counter", "history", "string"), ("users", "age", "int64")):
        op = sp.operator(op_id)
        assert op.max_parallelism == max_parallelism and op.parallelism == source.operator(op_id).parallelism
        table = op.keyed_state(state).to_arrow()
        assert all(assign_to_key_group(k, max_parallelism, key_type) == g
                   for k, g in zip(table["key"].to_pylist(), table["key_group"].to_pylist()))
        before = sorted(map(repr, source.operator(op_id).keyed_state(state).items()))
        assert sorted(map(repr, op.keyed_state(state).items())) == before
    # list state is kept as is: the same chunks, by reference
    assert sp.operator("counter").list_state("buffer").proto == source.operator("counter").list_state("buffer").proto
    restored = sp.restore_plan(2).subtask("counter", 1)
    assert all(max_parallelism * 1 // 2 <= g for g in restored.keyed_arrow("count")["key_group"].to_pylist())


def test_migrate_int32_to_int64(spark, keyed):
    from pyref.spark import migrate_state

    target = keyed.parent / "migrated"
    migrate_state(spark, keyed, target, "counter", "count", Int64(), progress=False)
    migrate_state(spark, target, keyed.parent / "migrated2", "counter", "history", Int64(), progress=False,
                  copy=True)
    sp = Savepoint.open(keyed.parent / "migrated2")
    assert verify(sp).ok and not sp.manifest.bases
    count = sp.operator("counter").keyed_state("count")
    assert count.value_serializer == Int64()
    assert dict(count.items()) == {f"/page/{i}": i for i in range(1000)}
    assert count.get("/page/999") == 999
    history = sp.operator("counter").keyed_state("history")
    assert history.proto.value_serializer == Int64().snapshot()
    assert history.get("/page/3") == [3, -3]
    with pytest.raises(IncompatibleSerializerError, match="counter/count"):
        migrate_state(spark, keyed, keyed.parent / "bad", "counter", "count", String(), progress=False)
    assert not (keyed.parent / "bad" / "_manifest").exists()


def test_spark_flatten_copies_a_shallow_chain(spark, seeds, capsys):
    """spark-flatten: the chunks of the savepoint and of its bases copied by Spark tasks; the
    copy reads the same and needs none of them."""
    assert main(["rescale", str(seeds), str(seeds.parent / "fl4"), "-p", "4"]) == 0
    capsys.readouterr()
    assert main(["spark-flatten", str(seeds.parent / "fl4"), str(seeds.parent / "fl-out" / "flat"),
                 "--master", "local[2]", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bases"] == []
    flat = Savepoint.open(seeds.parent / "fl-out" / "flat")
    assert not flat.manifest.bases and [o.parallelism for o in flat.operators] == [4, 4]
    shallow = Savepoint.open(seeds.parent / "fl4")
    for sp in (flat, shallow):
        assert dict(sp.operator("url-counter").keyed_state("count").items()) == {f"/page/{i}": i for i in range(50)}
    assert verify(flat).ok
    from pyref.spark import flatten

    with pytest.raises(InvalidArgumentError, match="is the base of"):  # fl4 uses seeds
        flatten(spark, seeds.parent / "fl4", seeds, overwrite=True, progress=False)


def test_spark_flatten_leaves_out_chunks_no_range_refers_to(spark, tmp_path):
    """A damaged list chunk no range refers to is no state (spec/format.md §5.3): the copy
    leaves it out instead of failing on its CRC32C."""
    from pyref.spark import flatten

    golden = pathlib.Path(__file__).resolve().parents[2] / "compat_tests" / "golden" / "1.0"
    flat = flatten(spark, golden / "manifest-rules-unreferenced-chunk-and-rows" / "savepoint", tmp_path / "flat",
                   progress=False)
    report = verify(flat)
    assert report.ok and not report.warnings


def test_spark_migrate_of_a_list_state_migrates_only_the_rows_ranges_select(spark, tmp_path):
    """An unselected row that is no int64 is no state (spec/format.md §5.3): the migration keeps
    it as it is instead of failing to decode it, and every element reads as before, migrated."""
    from pyref.serializers import Nullable
    from pyref.spark import migrate_state

    golden = pathlib.Path(__file__).resolve().parents[2] / "compat_tests" / "golden" / "1.0"
    source = golden / "manifest-rules-unreferenced-chunk-and-rows" / "savepoint"
    migrated = migrate_state(spark, source, tmp_path / "migrated", "source", "offsets", Nullable(Int64()),
                             copy=True, progress=False)
    assert verify(migrated).ok and not verify(migrated).warnings
    before = Savepoint.open(source)
    for p in (1, 2, 3):
        assert ([list(s.list_state("offsets")) for s in before.restore_plan(p).subtasks("source")]
                == [list(s.list_state("offsets")) for s in migrated.restore_plan(p).subtasks("source")])
    assert migrated.operator("source").proto.list_states[0].element_serializer == Nullable(Int64()).snapshot()


def test_cli_runs_the_jobs(spark, seeds, capsys):
    code = main(["change-max-parallelism", str(seeds), str(seeds.parent / "mp"), "-m", "256", "--master", "local[2]",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["bases"] == ["seeds"]
    counts = Savepoint.open(seeds.parent / "mp").operator("url-counter").keyed_state("count")
    assert counts.max_parallelism == 256 and counts.get("/page/7") == 7
    code = main(["migrate", str(seeds), str(seeds.parent / "mig"), "--operator", "kafka-source", "--state", "offsets",
                 "--serializer", "int64@v1"])
    assert code == 0 and "wrote" in capsys.readouterr().out
    assert main(["spark-rescale", str(seeds), str(seeds.parent / "p1"), "-p", "1"]) == 0
    assert main(["migrate", str(seeds), str(seeds.parent / "x"), "--operator", "url-counter", "--state", "count",
                 "--serializer", "string"]) == IncompatibleSerializerError.exit_code
    assert spark.range(1).count() == 1  # the CLI left the shared session running


def test_a_spark_property_spark_refuses_is_an_argument_error(spark, seeds, capsys):
    """Spark's IllegalArgumentException keeps its message out of args: --json printed "internal
    error: IllegalArgumentException()", exit code 1, naming neither the property nor the value."""
    code = main(["spark-rescale", str(seeds), str(seeds.parent / "bad-conf"), "-p", "2", "--json",
                 "--conf", "spark.sql.shuffle.partitions=abc"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 2 and report["type"] == "InvalidArgumentError", report
    assert "Spark refused the session's configuration" in report["error"]
    assert "abc" in report["error"] and "spark.sql.shuffle.partitions" in report["error"]  # quoted by Spark 4.1+ only


def test_parse_serializer():
    from pyref.spark.cli import parse_serializer

    assert parse_serializer("list<int64>") == ListOf(Int64())
    assert parse_serializer("tuple<string, int64>").snapshot().nested[1].serializer_id == "int64"
    assert parse_serializer("tuple<url:string,n:int64>@v2").snapshot().field_names == ["url", "n"]
    assert parse_serializer("map<string,list<int32>>").snapshot().nested[1].nested[0].serializer_id == "int32"
    for bad in ("list<int64", "int64>", "<>", "nosuch"):
        with pytest.raises(Exception):
            parse_serializer(bad)


def test_spark_rescale_refuses_a_target_linked_to_a_base_of_the_source(spark, seeds, capsys):
    """Issue 9 item 1 through spark-rescale: a target linked to a base of the source is that base."""
    parent = seeds.parent
    assert main(["spark-rescale", str(seeds), str(parent / "s4"), "-p", "4", "--json"]) == 0
    os.symlink("seeds", parent / "current")
    before = (seeds / "_manifest").read_bytes()
    code = main(["spark-rescale", str(parent / "s4"), str(parent / "current"), "-p", "2", "--overwrite", "--json"])
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == 2 and "own base" in json.loads(out)["error"]
    assert (seeds / "_manifest").read_bytes() == before
    assert verify(Savepoint.open(parent / "s4")).ok and verify(Savepoint.open(seeds)).ok
