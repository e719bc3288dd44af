"""pyref on a real Spark standalone cluster (a master and two workers, each its own JVM,
executors in JVMs of their own with their own Python workers) against the S3 server:
the driver is started by spark-submit with pyref shipped by --py-files, as the README
says, and an executor is SIGKILLed while write tasks upload. A format 1.2 savepoint (window
counts and their timers) is read and re-hashed there too."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import uuid

import pytest

from pyref import Savepoint
from pyref.inspection import verify
from pyref.io import open_io
from pyref.testing import SEED_TIMERS, SEED_WINDOW_COUNTS

pytest.importorskip("pyspark")
pytest.importorskip("pandas")
pytestmark = [pytest.mark.spark, pytest.mark.cluster]

JOB = pathlib.Path(__file__).with_name("cluster_job.py")
BUCKET = "pyref-tests"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3_server):
    from pyref.testing.spark_cluster import StandaloneCluster

    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), env=s3_server.env()) as running:
        yield running


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    return s3_server.env()


def own_files_listed(location: str) -> bool:
    """Whether data/ holds exactly the files the savepoint lists as its own."""
    listed = set(open_io(location).list_files("data"))
    return listed == {f.path for f in Savepoint.open(location).manifest.data_files if f.base == 0}


def submit_cluster_job(cluster, s3_env, tmp_path, *flags: str) -> tuple[str, dict]:
    from pyref.testing.spark_cluster import package_zip

    prefix = f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"
    conf = {f"spark.executorEnv.{k}": v for k, v in s3_env.items()}
    conf.update({"spark.executor.memory": "768m", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"})
    done = cluster.submit(JOB, [prefix, str(tmp_path / "result.json"), *flags],
                          py_files=package_zip(tmp_path / "pyref.zip"), conf=conf)
    assert done.returncode == 0, done.stderr[-6000:]
    return prefix, json.loads((tmp_path / "result.json").read_text())


COUNT = {f"/page/{i}": i for i in range(20_000)}


def test_spark_submit_bootstrap_read_rescale_with_an_executor_killed(cluster, s3_env, tmp_path):
    prefix, result = submit_cluster_job(cluster, s3_env, tmp_path, "--kill-executor")
    # Executors are JVMs of their own, and their Python workers import pyref from --py-files.
    assert len({jvm for _, jvm in result["executors"]}) == 2
    assert all("pyref.zip" in path for path, _ in result["executors"])
    # One executor died mid-upload; the commit held: a complete savepoint, no stray file.
    assert result["killed_executor"]
    boot = Savepoint.open(f"{prefix}/boot")
    assert boot.savepoint_id == result["boot"] and verify(boot).ok and own_files_listed(f"{prefix}/boot")
    assert dict(boot.operator("counter").keyed_state("count").items()) == COUNT
    assert result["read"] == {"n": len(COUNT), "total": sum(COUNT.values())}
    p5 = Savepoint.open(f"{prefix}/boot-p5")
    assert p5.operator("counter").parallelism == 5 and p5.manifest.bases[0].directory == "boot"
    restored = [k for s in p5.restore_plan(5).subtasks("counter") for k, _ in s.keyed_state("count")]
    assert sorted(restored) == sorted(COUNT)
    # Format 1.2 on the cluster: timers read by executors, then re-hashed with their window counts.
    assert sorted(map(tuple, result["timers"])) == sorted((url, w.start, w.end, t) for url, w, t in SEED_TIMERS)
    mp64 = Savepoint.open(f"{prefix}/windowed-mp64")
    op = mp64.operator("window-counter")
    assert op.max_parallelism == 64 and verify(mp64).ok and own_files_listed(f"{prefix}/windowed-mp64")
    assert {(url, w): v for url, w, v in op.keyed_state("count").items()} == SEED_WINDOW_COUNTS
    plan = mp64.restore_plan(3).subtasks("window-counter")
    assert sorted(t for s in plan for t in s.timers("window-timers")) == sorted(SEED_TIMERS)


@pytest.mark.slow
def test_spark_submit_rewrites_copy_rehash_and_migrate(cluster, s3_env, tmp_path):
    prefix, result = submit_cluster_job(cluster, s3_env, tmp_path, "--rewrites")
    copied = Savepoint.open(f"{prefix}/copies/boot-p2")
    assert not copied.manifest.bases and verify(copied).ok and own_files_listed(f"{prefix}/copies/boot-p2")
    assert dict(copied.operator("counter").keyed_state("count").items()) == COUNT
    mp7 = Savepoint.open(f"{prefix}/boot-mp7")
    assert mp7.operator("counter").max_parallelism == 7 and verify(mp7).ok
    assert dict(mp7.operator("counter").keyed_state("count").items()) == COUNT
    migrated = Savepoint.open(f"{prefix}/boot-migrated")
    state = migrated.operator("counter").keyed_state("count")
    assert state.value_serializer.serializer_id == "int64" and dict(state.items()) == COUNT


@pytest.mark.slow
def test_cli_runs_spark_jobs_on_the_cluster(cluster, s3_env):
    """``pyref spark-rescale`` / ``migrate`` with ``--master spark://``: the single-machine
    route, executors importing the pyref installed beside their interpreter."""
    from pyref.testing import write_seeds

    prefix = f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"
    write_seeds(f"{prefix}/sp", inline_bytes=0)
    for argv in (["spark-rescale", f"{prefix}/sp", f"{prefix}/copy/sp4", "-p", "4", "--copy"],
                 ["migrate", f"{prefix}/sp", f"{prefix}/sp-m", "--operator", "url-counter", "--state", "count",
                  "--serializer", "int64"]):
        run = subprocess.run([sys.executable, "-m", "pyref.cli", *argv, "--master", cluster.master_url, "--json"],
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-4000:]
    assert verify(Savepoint.open(f"{prefix}/copy/sp4")).ok and own_files_listed(f"{prefix}/copy/sp4")
    assert Savepoint.open(f"{prefix}/copy/sp4").operator("url-counter").parallelism == 4
    assert verify(Savepoint.open(f"{prefix}/sp-m")).ok
