"""Every read, write and job of pyref.spark on a Spark Connect session (a client with no
SparkContext), against a Connect server pyspark ships, started once for the module."""

from __future__ import annotations

import pytest

from pyref import Savepoint, SavepointWriter
from pyref.inspection import verify
from pyref.key_groups import assign_to_key_group
from pyref.serializers import Int32, Int64, String

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def connect():
    pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect]")
    from pyref.spark import spark_session
    from pyref.testing.spark_connect import ConnectServer

    with ConnectServer(**{"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"}) as server:
        session = spark_session(remote=server.url)
        yield session
        session.stop()


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("connect") / "source"
    with SavepointWriter(str(path), chunk_bytes=1024) as w:
        op = w.add_operator("counter", parallelism=2, key_serializer=String())
        op.keyed_state("count", Int32()).add([f"/p/{i}" for i in range(300)], list(range(300)))
        op.list_state("buffer", Int64()).add(1, [5, 6, 7])
    return path


def test_a_server_that_does_not_answer_is_refused_at_once():
    """pyspark's client retried such a server for over ten minutes, printing nothing."""
    pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect]")
    from pyref import InvalidArgumentError
    from pyref.spark import spark_session
    from pyref.testing.s3 import free_port

    url = f"sc://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(InvalidArgumentError, match=r"no Spark Connect server answers at 127.0.0.1:\d+"):
        spark_session(remote=url)


def test_session_has_no_spark_context(connect):
    from pyref.spark.session import is_connect

    assert is_connect(connect)
    with pytest.raises(Exception, match="sparkContext"):
        connect.sparkContext


def test_reads(connect, source):
    from pyref.spark import read_state

    want = {f"/p/{i}": i for i in range(300)}
    df = connect.read.format("savepoint").option("operator", "counter").option("state", "count").load(str(source))
    assert {r.key: r.value for r in df.collect()} == want
    assert {r.key: r.value for r in read_state(connect, source, "counter", "count").collect()} == want
    assert [r.value for r in read_state(connect, source, "counter", "count", keys=["/p/3"]).collect()] == [3]
    assert [r.value for r in read_state(connect, source, "counter", "buffer").collect()] == [5, 6, 7]


def test_bootstrap_and_jobs(connect, source, tmp_path):
    from pyref.spark import SavepointBuilder, change_max_parallelism, migrate_state, rescale

    rows = connect.createDataFrame([(f"/q/{i}", i) for i in range(200)], "url string, hits long")
    offsets = connect.createDataFrame([(0, 10), (1, 11)], "subtask int, offset long")
    with SavepointBuilder(connect, tmp_path / "boot") as b:
        b.add_operator("counter", 2, max_parallelism=64, key_serializer=String())
        b.add_keyed_state("counter", "count", rows, Int64(), key="url", value="hits")
        b.add_operator("source", 2)
        b.add_list_state("source", "offsets", offsets, Int64(), value="offset")
    boot = Savepoint.open(tmp_path / "boot")
    assert verify(boot).ok
    assert dict(boot.operator("counter").keyed_state("count").items()) == {f"/q/{i}": i for i in range(200)}

    replaced = connect.createDataFrame([("/q/1", -1)], "key string, value long")
    (replaced.write.format("savepoint").mode("overwrite").option("operator", "counter").option("state", "count")
     .option("valueSerializer", "int64").save(str(tmp_path / "boot")))
    assert dict(Savepoint.open(tmp_path / "boot").operator("counter").keyed_state("count").items()) == {"/q/1": -1}

    rescale(source, tmp_path / "p3", 3, spark=connect, copy=True, progress=False)  # chunks copied by tasks
    assert Savepoint.open(tmp_path / "p3").operator("counter").parallelism == 3
    for max_parallelism in (256, 7):  # written where read; shuffled by key group
        target = source.parent / f"max-{max_parallelism}"  # shallow: beside its source
        change_max_parallelism(connect, source, target, max_parallelism, progress=False)
        state = Savepoint.open(target).operator("counter").keyed_state("count")
        assert {c.key_group for c in state.proto.chunks} <= {
            assign_to_key_group(f"/p/{i}", max_parallelism, "string") for i in range(300)}
        assert dict(state.items()) == {f"/p/{i}": i for i in range(300)}
    migrate_state(connect, source, source.parent / "migrated", "counter", "count", Int64(), progress=True)
    assert Savepoint.open(source.parent / "migrated").operator("counter").keyed_state("count").get("/p/7") == 7


def test_import_flink(connect, tmp_path):
    from compat_tests.flink.imports import CORPUS, import_options
    from pyref.flink.importer import import_flink as core_import
    from pyref.spark import import_flink, read_flink_state

    case = CORPUS / "2.1.3/hashmap/operator-state"
    if not case.exists():
        pytest.skip("no Flink corpus")
    core = core_import(case / "savepoint", tmp_path / "core", **import_options(case))
    report = import_flink(connect, case / "savepoint", tmp_path / "imported", progress=False, **import_options(case))
    assert report.rows == core.rows > 0 and verify(Savepoint.open(tmp_path / "imported")).ok
    op = next(o for o in report.operators if o["states"])
    state = op["states"][0]
    read = read_flink_state(connect, case / "savepoint", op["flink_operator_id"], state["name"])
    assert read.count() == state["rows"]


def test_export_flink(connect, source, tmp_path):
    """The export to Flink runs on Connect (plain rows, no SparkContext) and writes what the
    core export writes (tests/spark/test_flink_export.py compares the streams byte for byte)."""
    from pyref.flink import export_savepoint
    from pyref.spark import export_flink

    core = export_savepoint(source, tmp_path / "core", flink_version="2.3", parallelism=3, inline_bytes=0)
    on_connect = export_flink(connect, source, tmp_path / "connect", flink_version="2.3", parallelism=3,
                              inline_bytes=0, progress=False)
    assert on_connect.to_dict() | {"path": None} == core.to_dict() | {"path": None}
    # The same state files (their names are random), and _metadata.
    assert len(list((tmp_path / "connect").iterdir())) == on_connect.state_files + 1 == core.state_files + 1


def test_a_task_error_is_raised_as_itself(connect, tmp_path):
    from pyref import InvalidArgumentError
    from pyref.spark import SavepointBuilder

    rows = connect.createDataFrame([("a", 1), ("a", 2)], "k string, v long")
    with pytest.raises(InvalidArgumentError, match="two rows of key='a'") as raised:
        with SavepointBuilder(connect, tmp_path / "sp") as b:
            b.add_operator("op", 2, max_parallelism=8, key_serializer=String())
            b.add_keyed_state("op", "s", rows, Int64(), key="k", value="v")
    assert raised.value.state == "op/s"
