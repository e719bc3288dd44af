"""Flink savepoints on Spark: the parallel import writes what the core import writes
(a HashMap backend's retained checkpoint too; same canonical dump, same operators and
serializer snapshots), a Flink savepoint's states read as DataFrames, the CLI, and a
max-parallelism change of an import, which moves every key to the key group Flink's hash
gives it."""

from __future__ import annotations

import gzip
import json
import pathlib

import pytest

from compat_tests.canonical import canonical_text, dump_savepoint
from pyref import Savepoint
from pyref.cli import main
from pyref.errors import InvalidArgumentError, UnsupportedFormatError
from pyref.flink.importer import import_flink as core_import
from pyref.key_groups import assign_to_key_group

from compat_tests.flink.imports import CORPUS, import_options, ttl_configs

pytestmark = [pytest.mark.spark, pytest.mark.skipif(not CORPUS.exists(), reason="no Flink corpus")]

CHECKPOINTS = pathlib.Path(__file__).resolve().parents[1] / "flink" / "data" / "checkpoints"
#: Keyed state of every kind with TTL and POJO keys; windows and timers; operator, union and
#: broadcast state with coordinator state; every value type (a MAP state's null value replans).
CASES = ["2.3.0/rocksdb/keyed-kinds", "2.1.3/hashmap/operator-state", "1.18.1/rocksdb/types",
         pytest.param("1.20.3/hashmap/windows", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", CASES)
def test_spark_import_writes_what_the_core_import_writes(spark, tmp_path, name) -> None:
    case = CORPUS / name
    assert_spark_import_is_the_core_import(spark, case / "savepoint", import_options(case), tmp_path)


def test_spark_import_of_a_heap_checkpoint_writes_what_the_core_import_writes(spark, tmp_path) -> None:
    """A HashMap backend's retained checkpoint (its own keyed layout: every kind, TTL, timers)."""
    case = CHECKPOINTS / "1.20.3-hashmap-heap-kinds"
    truth = json.loads(gzip.decompress((case / "truth.json.gz").read_bytes()))
    options = {"uids": list(truth["operators"]), "ttl": ttl_configs(truth)}
    assert_spark_import_is_the_core_import(spark, case / "checkpoint", options, tmp_path)


def test_spark_import_of_an_incremental_rocksdb_checkpoint_writes_what_the_core_import_writes(spark, tmp_path) -> None:
    """RocksDB's SST files of several checkpoints, in the checkpoint's ../shared, merged on the executors."""
    case = CHECKPOINTS / "2.3.0-rocksdb-incremental-churn"
    truth = json.loads(gzip.decompress((case / "truth.json.gz").read_bytes()))
    assert_spark_import_is_the_core_import(spark, case / "checkpoint", {"uids": list(truth["operators"])}, tmp_path)


def test_spark_import_of_an_unaligned_checkpoint_drops_its_in_flight_data_only_when_told(spark, tmp_path) -> None:
    """Refused by operator and bytes as the core import refuses it; with the opt-in, the same report."""
    from pyref.spark import import_flink

    case = CHECKPOINTS / "2.3.0-hashmap-unaligned-backpressure"
    with pytest.raises(UnsupportedFormatError, match="slow-counter .* bytes of input channels"):
        import_flink(spark, case / "checkpoint", tmp_path / "refused", progress=False,
                     uids=["events", "events-filter", "slow-counter"])
    assert_spark_import_is_the_core_import(spark, case / "checkpoint", {
        "uids": ["events", "events-filter", "slow-counter"], "drop_in_flight_data": True}, tmp_path)


def assert_spark_import_is_the_core_import(spark, source, options: dict, tmp_path) -> None:
    from pyref.spark import import_flink

    core = core_import(source, tmp_path / "core", **options)
    on_spark = import_flink(spark, source, tmp_path / "spark", progress=False, **options)
    assert on_spark.rows == core.rows and on_spark.attempts == core.attempts
    assert on_spark.to_dict()["operators"] == core.to_dict()["operators"]
    assert on_spark.demotions == core.demotions and on_spark.format_version == core.format_version
    dumps = [canonical_text(dump_savepoint(p, [1, 3], canonical_version=2)) for p in (tmp_path / "core",
                                                                                       tmp_path / "spark")]
    assert dumps[0] == dumps[1]
    manifests = [Savepoint.open(tmp_path / p).manifest for p in ("core", "spark")]
    for a, b in zip(*(sorted(m.operators, key=lambda o: o.operator_id) for m in manifests)):
        for op in (a, b):  # everything but where the chunks are
            for state in [*op.list_states, *op.keyed_states, *op.broadcast_states, *op.timer_services]:
                del state.chunks[:]
                if hasattr(state, "partitions"):
                    del state.partitions[:]
            op.ClearField("coordinator_state")
        assert a == b
    data = tmp_path / "spark" / "data"  # no file of a task attempt or of a replanned run is left
    present = sorted(f"data/{p.name}" for p in data.iterdir()) if data.exists() else []
    assert present == sorted(f.path for f in manifests[1].data_files)


def test_flink_states_read_as_dataframes(spark, tmp_path) -> None:
    from pyref.spark import read_flink_state, read_state

    case = CORPUS / "2.3.0/hashmap/keyed-kinds"
    core_import(case / "savepoint", tmp_path / "sp", **import_options(case))

    def rows(df, columns):
        return sorted(tuple(json.dumps(r[c], sort_keys=True, default=str) for c in columns) for r in df.collect())

    for state, columns in (("buckets", ["key_group", "key", "user_key", "value"]),
                           ("ttl-nums", ["key", "value", "ttl_timestamp"])):
        flink = read_flink_state(spark, case / "savepoint", "keyed-kinds", state)
        imported = read_state(spark, tmp_path / "sp", "keyed-kinds", state)
        assert rows(flink, columns) == rows(imported, columns), state
        assert set(flink.columns) == set(imported.columns) | {"subtask"}, state
    via_read_state = read_state(spark, case / "savepoint", "keyed-kinds", "stats")  # a Flink path: dispatched
    assert rows(via_read_state, ["key", "value"]) == rows(read_state(spark, tmp_path / "sp", "keyed-kinds", "stats"),
                                                          ["key", "value"])
    timers = read_flink_state(spark, case / "savepoint", "keyed-kinds", timer_service="user-timers",
                              domain="event_time")
    imported = read_state(spark, tmp_path / "sp", "keyed-kinds", timer_service="user-timers", domain="event_time")
    assert rows(timers, ["key_group", "key", "timestamp"]) == rows(imported, ["key_group", "key", "timestamp"])
    source = read_flink_state(spark, case / "savepoint", "events-source", "SourceReaderState")
    assert [tuple(r) for r in source.select("subtask", "index").orderBy("subtask").collect()] == [(0, 0), (1, 0),
                                                                                                 (2, 0)]
    raw = read_flink_state(spark, case / "savepoint", "keyed-kinds", "buckets", raw=True)
    assert raw.columns == ["key_group", "key", "namespace", "user_key", "value_is_null", "value", "subtask"]
    assert raw.count() == read_state(spark, tmp_path / "sp", "keyed-kinds", "buckets").count()


def test_spark_import_flink_command(spark, tmp_path, capsys) -> None:
    case = CORPUS / "2.3.0/hashmap/seeds"
    code = main(["spark-import-flink", str(case / "savepoint"), str(tmp_path / "sp"), "--master", "local[2]",
                 "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and {op["operator_id"] for op in result["operators"]} >= {"url-counter", "kafka-source"}
    assert Savepoint.open(tmp_path / "sp").operator("url-counter").keyed_state("count").get("/page/7") == 7


def test_max_parallelism_change_of_an_import_follows_flinks_hash(spark, tmp_path) -> None:
    """Hashed key groups (String, Long, Tuple keys) move to the key group Flink's hash gives
    them at the new max parallelism; writer-assigned ones (POJO keys) cannot move."""
    from pyref.spark import change_max_parallelism

    case = CORPUS / "2.3.0/rocksdb/keyed-kinds"  # max parallelism 1000
    core_import(case / "savepoint", tmp_path / "sp", **import_options(case))
    hashed = {"keyed-kinds": "string", "long-keys": "int64", "tuple-keys": ("string", "int32")}
    change_max_parallelism(spark, tmp_path / "sp", tmp_path / "m128", {k: 128 for k in hashed}, progress=False)
    before, after = Savepoint.open(tmp_path / "sp"), Savepoint.open(tmp_path / "m128")
    for operator, key_type in hashed.items():
        old, new = before.operator(operator), after.operator(operator)
        assert new.max_parallelism == 128
        for name in old.keyed_state_names:
            rows = new.keyed_state(name).to_arrow()
            keys = rows.column("key").to_pylist()
            keys = [tuple(k.values()) if isinstance(k, dict) else k for k in keys]
            assert rows.column("key_group").to_pylist() == [assign_to_key_group(k, 128, key_type) for k in keys]
            assert rows.num_rows == old.keyed_state(name).to_arrow().num_rows
        for service in old.timer_services:
            assert len(list(new.timer_service(service.name, service.domain).timers())) == len(list(service.timers()))
    with pytest.raises(InvalidArgumentError, match="writer assigned"):
        change_max_parallelism(spark, tmp_path / "sp", tmp_path / "pojo", {"pojo-keys": 128}, progress=False)


def test_max_parallelism_change_of_a_sql_import_places_its_keys_as_flink(spark, tmp_path) -> None:
    """Flink SQL keys (BinaryRowData, writer-assigned key groups) are re-hashed by Flink's
    BinaryRowData hash: the export back to Flink holds every row under the key group Flink
    computes at the new max parallelism."""
    from compat_tests.flink.sql import TTL_DEFAULT
    from pyref.flink import FlinkSavepoint, export_savepoint
    from pyref.flink.row_keys import row_key_groups
    from pyref.spark import change_max_parallelism

    (tmp_path / "flink").mkdir()
    (tmp_path / "flink" / "_metadata").write_bytes(gzip.decompress(
        (CHECKPOINTS.parent / "sql" / "2.3.0-hashmap" / "_metadata.gz").read_bytes()))
    core_import(tmp_path / "flink", tmp_path / "sp", ttl_default=TTL_DEFAULT)
    wider = {op.operator_id: 200 for op in Savepoint.open(tmp_path / "sp").operators if op.max_parallelism == 128}
    change_max_parallelism(spark, tmp_path / "sp", tmp_path / "m200", wider, progress=False)
    export_savepoint(tmp_path / "m200", tmp_path / "export", flink_version="2.3.0")
    rows = 0
    with FlinkSavepoint.open(tmp_path / "export") as export, FlinkSavepoint.open(tmp_path / "flink") as flink:
        for op in export.operators:
            for name in op.keyed_state_names:
                table = op.keyed_state(name).to_arrow(raw=True)
                assert op.max_parallelism in (200, 1)  # the global Top-N's stays 1
                groups = row_key_groups(table.column("key"), op.max_parallelism)
                assert groups.tolist() == table.column("key_group").to_pylist()
                assert table.num_rows == flink.operator(op.operator_id).keyed_state(name).to_arrow(raw=True).num_rows
                rows += table.num_rows
    assert rows > 400


@pytest.mark.parametrize("selection", [{"keys": ["user-01"]}, {"key_groups": [3]}, {"subtasks": [0]},
                                       {"target_parallelism": 2}])
def test_a_selection_on_a_flink_savepoint_is_refused_not_ignored(selection) -> None:
    from pyref.spark import read_state

    with pytest.raises(InvalidArgumentError, match=f"{next(iter(selection))}: for pyref savepoints"):
        read_state(None, CORPUS / "2.3.0/hashmap/keyed-kinds/savepoint", "keyed-kinds", "count", **selection)


def test_the_savepoint_data_source_reads_a_flink_savepoint(spark) -> None:
    from pyref.spark import read_flink_state

    path = str(CORPUS / "2.3.0/hashmap/keyed-kinds/savepoint")

    def load(**options):
        reader = spark.read.format("savepoint")
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load(path)

    for operator, state in (("keyed-kinds", "buckets"), ("events-source", "SourceReaderState")):
        df, expected = load(operator=operator, state=state), read_flink_state(spark, path, operator, state)
        assert df.columns == expected.columns
        assert sorted(map(tuple, df.collect())) == sorted(map(tuple, expected.collect()))
    timers = load(operator="keyed-kinds", timerService="user-timers", domain="event_time")
    assert timers.count() == read_flink_state(spark, path, "keyed-kinds", timer_service="user-timers",
                                              domain="event_time").count() > 0
    with pytest.raises(Exception, match="option 'targetParallelism': for pyref savepoints"):
        load(operator="keyed-kinds", state="count", targetParallelism="2")


def test_a_name_that_matches_no_state_or_timer_service_is_refused_listing_those_there_are() -> None:
    from pyref.spark.flink import FlinkStateRead

    path = CORPUS / "2.3.0/hashmap/keyed-kinds/savepoint"
    with pytest.raises(InvalidArgumentError, match="no state 'cnt' \\(its states: 'blob', 'buckets', 'count',"):
        FlinkStateRead.plan(path, "keyed-kinds", "cnt")
    with pytest.raises(InvalidArgumentError, match="no state 'cnt' \\(its states: 'SourceReaderState'\\)"):
        FlinkStateRead.plan(path, "events-source", "cnt")
    with pytest.raises(InvalidArgumentError, match="timer service 'user-timer' in operator keyed-kinds \\(its timer "
                                                   "services: 'user-timers'\\)"):
        FlinkStateRead.plan(path, "keyed-kinds", timer_service="user-timer")
