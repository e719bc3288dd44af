"""The Spark jobs on an object store (moto's S3 server and Azurite, real S3 and Azure Blob APIs), as a data engineer
runs them with savepoints in a bucket: every executor reaches the store through pyref's
storage with the credentials of its environment (here ``sparkContext.environment``, which
Spark hands to its Python workers; on a cluster, ``spark.executorEnv.*`` or the machine's)."""

from __future__ import annotations

import json

import pytest

from compat_tests.canonical import dump_savepoint
from compat_tests.flink.imports import CORPUS, import_options
from pyref import Savepoint, verify
from pyref.flink import FlinkSavepoint
from pyref.flink.importer import import_flink as core_import
from pyref.serializers import Int64, String
from pyref.storage import open_io

pytestmark = pytest.mark.spark


@pytest.fixture
def store_spark(spark, store):
    """The session's executors reach the test's store through its proxy (set per test: the proxy is)."""
    environment = spark.sparkContext.environment
    saved = dict(environment)
    environment.update(store.server.env(store.proxy.endpoint))
    yield spark
    environment.clear()
    environment.update(saved)


def _upload(directory, url: str) -> None:
    io = open_io(url)
    for path in sorted(directory.iterdir()):
        out = io.create(path.name)
        out.write(path.read_bytes())
        out.close()


def test_bootstrap_read_and_rescale_a_savepoint_in_a_bucket(store_spark, store):
    from pyref.spark import SavepointBuilder, read_state, rescale

    spark = store_spark
    url = f"{store.prefix}/savepoints/counts"
    rows = spark.createDataFrame([(f"/page/{i}", i) for i in range(500)], "key string, value long")
    with SavepointBuilder(spark, url) as builder:
        builder.add_operator("url-counter", parallelism=2, max_parallelism=128, key_serializer=String())
        builder.add_keyed_state("url-counter", "count", rows, Int64())
    sp = Savepoint.open(url)
    assert dict(sp.operator("url-counter").keyed_state("count").items()) == {f"/page/{i}": i for i in range(500)}
    assert verify(sp).ok
    read = read_state(spark, url, "url-counter", "count").select("key", "value").collect()
    assert sorted((r.key, r.value) for r in read) == sorted((f"/page/{i}", i) for i in range(500))
    rescaled = rescale(url, f"{store.prefix}/savepoints/counts-4", 4, spark=spark, copy=True, progress=False)
    plan = rescaled.restore_plan(4)
    shares = [dict(plan.subtask("url-counter", i).keyed_state("count")) for i in range(4)]
    assert all(shares) and {k: v for share in shares for k, v in share.items()} == {f"/page/{i}": i for i in range(500)}


# S3 only: what is store-specific here (executors reaching the store) the test above shows on each store.
@pytest.mark.parametrize("store", ["s3"], indirect=True)
def test_import_a_flink_savepoint_from_a_bucket_and_export_it_back(store_spark, store, tmp_path):
    from pyref.spark import export_flink, import_flink, read_state

    spark = store_spark
    case = CORPUS / "2.3.0/rocksdb/keyed-kinds"
    flink_url = f"{store.prefix}/flink/savepoint-7f"
    _upload(case / "savepoint", flink_url)
    imported = f"{store.prefix}/pyref/imported"
    import_flink(spark, flink_url, imported, progress=False, **import_options(case))
    core_import(case / "savepoint", tmp_path / "local", **import_options(case))
    assert dump_savepoint(imported, [1, 3], 2) == dump_savepoint(tmp_path / "local", [1, 3], 2)

    # Read in place on Spark, without importing: the 60 keys' counts the job wrote.
    truth = json.loads((case / "truth.json").read_text())["operators"]["keyed-kinds"]["keyed_state"]["count"]
    counts = read_state(spark, flink_url, "keyed-kinds", "count").select("key", "value").collect()
    assert sorted((r.key, r.value) for r in counts) == sorted((e["key"], e["value"]) for e in truth["entries"])

    exported = f"{store.prefix}/flink/exported"
    result = export_flink(spark, imported, exported, flink_version="2.3.0", inline_bytes=0, progress=False)
    assert result.state_files > 0
    with FlinkSavepoint.open(exported) as back:
        assert {op.operator_id for op in back.operators} >= {op.operator_id for op in FlinkSavepoint.open(
            case / "savepoint").operators if op.keyed_state_names or op.list_state_names}
