"""The Flink export as a Spark job: the same savepoint as the core export, one task per
state handle, and nothing left behind when a task fails."""

from __future__ import annotations

import json
import os

import pytest

from pyref import SavepointWriter, TtlConfig
from pyref.cli import main
from pyref.errors import UnsupportedFormatError
from pyref.flink import export_savepoint
from pyref.flink.metadata import parse_metadata
from pyref.flink.to_flink import flink_serializer
from pyref.redistribution import DistributionMode
from pyref.serializers import Int32, Int64, ListOf, Nullable, String, TimeWindow, Window

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """Keyed state of every kind in many small chunks, timers, list and broadcast state."""
    path = tmp_path_factory.mktemp("flink-export") / "sp"
    with SavepointWriter(str(path), chunk_bytes=2048, file_bytes=32768) as w:
        op = w.add_operator("counter", parallelism=3, max_parallelism=256, key_serializer=String())
        urls = [f"/page/{i}" for i in range(2000)]
        op.keyed_state("count", Int64()).add(urls, list(range(2000)))
        op.keyed_state("tags", Nullable(Int32()), kind="map", user_key_serializer=String()).add(
            urls[:500], [None if i % 9 == 0 else i for i in range(500)], [f"t{i % 7}" for i in range(500)])
        op.keyed_state("history", String(), kind="list", ttl=TtlConfig(60_000)).add(
            urls[:300], [[f"h{j}" for j in range(i % 4)] for i in range(300)], ttl_timestamps=[7] * 300)
        op.keyed_state("windows", ListOf(Int64()), namespace_serializer=TimeWindow()).add(
            urls[:100], [[i] for i in range(100)], namespaces=[Window(0, 1000)] * 100)
        op.timer_service("t", "event_time").add(urls[:50], list(range(50)))
        op.list_state("buffer", Int32()).add(1, [5, 6, 7])
        op.broadcast_state("rules", String(), Int64()).add_all(["a", "b"], [1, 2])
    return path


def streams(path) -> dict:
    """Every handle's stream bytes by (operator, subtask, kind), with its offsets."""
    metadata = parse_metadata((path / "_metadata").read_bytes())
    out = {}
    for op in metadata.operators:
        for sub in op.subtasks:
            for kind, handle in (("operator", sub.managed_operator_state), ("keyed", sub.managed_keyed_state)):
                if handle is not None:
                    data = handle.stream.data if handle.stream.kind == "inline" else (
                        path / handle.stream.location).read_bytes()
                    offsets = handle.offsets if kind == "keyed" else handle.states
                    out[op.operator_id, sub.index, kind] = (data, offsets)
    return out


@pytest.mark.parametrize("parallelism, inline_bytes", [(None, 0), (5, 20480)])
def test_spark_writes_the_core_exports_savepoint(spark, source, tmp_path, parallelism, inline_bytes):
    from pyref.spark import export_flink

    core = export_savepoint(source, tmp_path / "core", flink_version="2.3", parallelism=parallelism,
                            inline_bytes=inline_bytes)
    on_spark = export_flink(spark, source, tmp_path / "spark", flink_version="2.3", parallelism=parallelism,
                            inline_bytes=inline_bytes, progress=False)
    assert on_spark.to_dict() | {"path": None} == core.to_dict() | {"path": None}
    assert streams(tmp_path / "spark") == streams(tmp_path / "core")
    assert len(os.listdir(tmp_path / "spark")) == on_spark.state_files + 1


def test_a_failed_task_leaves_nothing(spark, tmp_path):
    """A value Flink's serializer cannot hold is found by the task writing it: the job fails with
    the typed error and the target holds nothing, not even the other tasks' files."""
    from pyref.spark import export_flink

    nullable = Nullable(Int64())
    snapshot = nullable.snapshot()
    snapshot.engine.engine, snapshot.engine.class_name = "flink", "LongSerializer"
    snapshot.engine.snapshot = flink_serializer(Int64().snapshot(), "x").snapshot

    class KeptLong(Nullable):
        def snapshot(self):
            return snapshot

    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", parallelism=4, key_serializer=String())
        op.keyed_state("fine", Int64()).add([f"k{i}" for i in range(100)], list(range(100)))
        op.keyed_state("null", KeptLong(Int64())).add(["k1"], [None])
        op.list_state("buffer", Int64(), DistributionMode.UNION).add(0, [1])
    with pytest.raises(UnsupportedFormatError) as caught:  # the task's error, raised as itself
        export_flink(spark, tmp_path / "sp", tmp_path / "flink", flink_version="1.20", inline_bytes=0, progress=False)
    assert "a null value where Flink's int64 serializer writes none" in caught.value.reason
    assert not (tmp_path / "flink").exists()
    with pytest.raises(UnsupportedFormatError):  # the core export says the same
        export_savepoint(tmp_path / "sp", tmp_path / "flink", flink_version="1.20")


def test_cli_spark_export_flink(spark, source, tmp_path, capsys):
    assert main(["spark-export-flink", str(source), str(tmp_path / "f"), "--flink-version", "2.0", "-p", "2",
                 "--master", "local[2]", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["metadata_version"] == 5 and report["operators"][0]["parallelism"] == 2
    assert parse_metadata((tmp_path / "f/_metadata").read_bytes()).version == 5
