"""The target file size of Spark writes: task counts and file sizes from the data size."""

from __future__ import annotations

import math
import os

import pytest

from pyref import InvalidArgumentError, Savepoint
from pyref.serializers import Bytes, String

pytestmark = pytest.mark.spark

ROWS = 28_000  # 128 incompressible bytes and a short key each: about 4 MB stored
MB = 1 << 20


def _entries(spark):
    # SQL text: pyspark.sql.functions columns are Spark Connect's in a process that has a Connect session.
    return spark.range(ROWS).selectExpr("concat('user-', id) AS key",
                                        "concat(unhex(sha2(string(id), 512)), unhex(sha2(concat(id, '#'), 512))) "
                                        "AS value")


def _data_files(path) -> list[int]:
    """The sizes of the savepoint's own data files."""
    sp = Savepoint.open(path)
    return [os.path.getsize(os.path.join(path, f.path)) for f in sp.manifest.data_files if f.base == 0]


def _bootstrap(spark, path, **options) -> list[int]:
    from pyref.spark import SavepointBuilder

    with SavepointBuilder(spark, path, **options) as b:
        b.add_operator("users", 2, max_parallelism=128, key_serializer=String())
        b.add_keyed_state("users", "profile", _entries(spark), Bytes())
    return _data_files(path)


def test_bootstrap_files_are_about_the_target_size(spark, tmp_path):
    default = _bootstrap(spark, tmp_path / "default")
    files = _bootstrap(spark, tmp_path / "target", target_file_bytes=MB)
    stored = sum(files)
    assert 3.5 * MB < stored < 4.5 * MB and len(default) <= 2  # one task per core by default
    assert math.ceil(stored / MB) <= len(files) <= 2 * math.ceil(stored / MB) and max(files) <= MB
    assert dict(Savepoint.open(tmp_path / "target").operator("users").keyed_state("profile").items()) == dict(
        Savepoint.open(tmp_path / "default").operator("users").keyed_state("profile").items())
    assert spark.conf.get("spark.sql.adaptive.coalescePartitions.parallelismFirst") == "true"  # restored


def test_a_rewrite_writes_one_task_per_target_size(spark, tmp_path):
    from pyref.spark import change_max_parallelism

    stored = sum(_bootstrap(spark, tmp_path / "source", partitions=1))
    change_max_parallelism(spark, tmp_path / "source", tmp_path / "rehashed", 129, copy=True, progress=False,
                           target_file_bytes=MB)  # coprime: shuffled by key group into ceil(4 MB / 1 MB) tasks
    files = _data_files(tmp_path / "rehashed")
    assert math.ceil(stored / MB) <= len(files) <= 2 * math.ceil(stored / MB) and max(files) <= MB


def test_the_write_option_sizes_each_tasks_files(spark, tmp_path):
    def write(path, **options):
        writer = (_entries(spark).repartition(1).write.format("savepoint").mode("append").option("operator", "users")
                  .option("state", "profile").option("keySerializer", "string").option("valueSerializer", "bytes")
                  .option("parallelism", 2))
        for name, value in options.items():
            writer = writer.option(name, value)
        writer.save(str(path))
        return _data_files(path)

    files = write(tmp_path / "sp", targetFileSize="1MB")
    assert math.ceil(sum(files) / MB) <= len(files) <= 2 * math.ceil(sum(files) / MB) and max(files) <= MB
    for options, message in (({"targetFileSize": "0"}, "option 'targetFileSize': expected a size > 0"),
                             ({"targetFileSize": "1MB", "fileBytes": "1048576"}, "not both")):
        with pytest.raises(Exception, match=message):
            write(tmp_path / "bad", **options)
        assert not (tmp_path / "bad" / "_manifest").exists()


@pytest.mark.parametrize("target", [0, -1, 1.5, "1MB", True])
def test_a_target_file_size_is_a_whole_number_of_bytes(spark, tmp_path, target):
    from pyref.spark import SavepointBuilder

    with pytest.raises(InvalidArgumentError, match="target_file_bytes is a whole number of bytes > 0"):
        SavepointBuilder(spark, tmp_path / "sp", target_file_bytes=target)
