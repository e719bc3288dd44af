"""A pyref error raised in a Spark task reaches the driver as itself: same class, message and
fields (pyref.spark.task_errors), from SavepointBuilder, df.write.format("savepoint") under
typed_errors(), and the CLI's Spark jobs (exit code and JSON)."""

from __future__ import annotations

import json

import pytest

from pyref import CorruptSavepointError, InvalidArgumentError, Savepoint, SavepointWriter
from pyref.cli import main
from pyref.serializers import Int32, Int64, String

pytestmark = pytest.mark.spark


def _spark_failure(traceback: str, sql_state: bool = False) -> Exception:
    """What Spark raises on the driver for a task that failed with ``traceback`` (a Spark
    Connect client's message ends with the SQLSTATE)."""
    from pyspark.errors.exceptions.base import PythonException

    return PythonException(message=f"An exception was thrown from the Python worker:\n{traceback}"
                                   f"{chr(10) + ' SQLSTATE: 38000' if sql_state else ''}")


def _traceback(*lines: str) -> str:
    return "\n".join(["Traceback (most recent call last):", '  File "/x/pyref/keys.py", line 52, in as_key_array',
                      '    raise InvalidArgumentError("keys cannot be null")', *lines])


@pytest.mark.parametrize("error", [
    InvalidArgumentError("keys cannot be null"),
    InvalidArgumentError("two rows of key='a' [b]: stored", state="op/s"),
    CorruptSavepointError("CRC mismatch", path="data/f-1.svd", state="op/s", byte_range=(12, 40)),
    CorruptSavepointError("bad [file=x]", path="a, state=b"),  # fields that cannot be told apart: the message whole
    InvalidArgumentError("two lines:\nthe second"),
])
@pytest.mark.parametrize("connect", [False, True])
def test_a_task_error_is_rebuilt_from_its_traceback(error, connect):
    pytest.importorskip("pyspark")
    from pyref.spark.task_errors import task_error

    rebuilt = task_error(_spark_failure(_traceback(f"pyref.errors.{type(error).__name__}: {error}"), connect))
    assert type(rebuilt) is type(error) and str(rebuilt) == str(error)
    if "a, state=b" not in str(error):
        assert (rebuilt.reason, rebuilt.path, rebuilt.state, rebuilt.byte_range) == (
            error.reason, error.path, error.state, error.byte_range)


def test_only_pyref_errors_from_spark_are_rebuilt():
    pytest.importorskip("pyspark")
    from pyref.spark.task_errors import task_error, typed_errors

    chained = _traceback("ValueError: out of range", "", "The above exception was the direct cause of the "
                         "following exception:", "", _traceback("pyref.errors.StorageError: disk full [file=d/x]"))
    assert str(task_error(_spark_failure(chained))) == "disk full [file=d/x]"
    assert task_error(_spark_failure(_traceback("ValueError: pyref.errors.InvalidArgumentError: no"))) is None
    assert task_error(_spark_failure(_traceback("pyref.errors.Exception: not one of pyref's"))) is None
    assert task_error(ValueError(_traceback("pyref.errors.InvalidArgumentError: not from Spark"))) is None
    with pytest.raises(InvalidArgumentError, match="keys cannot be null") as raised:
        with typed_errors():
            raise _spark_failure(_traceback("pyref.errors.InvalidArgumentError: keys cannot be null"))
    assert "Python worker" in str(raised.value.__cause__)
    with pytest.raises(KeyError):
        with typed_errors():
            raise KeyError("passes unchanged")


def test_bootstrap_duplicate_key_is_the_typed_error(spark, tmp_path):
    from pyspark.errors import PythonException

    from pyref.spark import SavepointBuilder

    rows = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "k string, v long")
    with pytest.raises(InvalidArgumentError, match="two rows of key='a'") as raised:
        with SavepointBuilder(spark, tmp_path / "sp") as b:
            b.add_operator("op", 2, max_parallelism=8, key_serializer=String())
            b.add_keyed_state("op", "s", rows, Int64(), key="k", value="v")
    assert raised.value.state == "op/s" and raised.value.reason.endswith("combine='sum' (say)")
    assert isinstance(raised.value.__cause__, PythonException)
    assert not (tmp_path / "sp" / "_manifest").exists()


def test_write_format_savepoint_error_under_typed_errors(spark, tmp_path):
    from pyref.spark import typed_errors

    rows = spark.createDataFrame([("a", 1 << 40)], "key string, value long")
    with pytest.raises(InvalidArgumentError, match="int32 serializer cannot encode these values"):
        with typed_errors():
            (rows.write.format("savepoint").option("operator", "op").option("state", "s").option("parallelism", "2")
             .option("keySerializer", "string").option("valueSerializer", "int32").mode("overwrite")
             .save(str(tmp_path / "sp")))


def test_cli_job_exits_with_the_task_error(spark, tmp_path, capsys):
    path = tmp_path / "sp"
    with SavepointWriter(str(path), chunk_bytes=1024, inline_bytes=0) as w:
        w.add_operator("op", parallelism=2, key_serializer=String()).keyed_state("count", Int32()).add(
            [f"/p/{i}" for i in range(300)], list(range(300)))
    chunk = Savepoint.open(path).operator("op").keyed_state("count").proto.chunks[3]
    data = path / Savepoint.open(path).manifest.data_files[chunk.range.file].path
    damaged = bytearray(data.read_bytes())
    damaged[chunk.range.offset + chunk.range.length // 2] ^= 0xFF
    data.write_bytes(bytes(damaged))
    code = main(["change-max-parallelism", str(path), str(tmp_path / "mp"), "-m", "256", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == CorruptSavepointError.exit_code == out["exit_code"]
    assert out["type"] == "CorruptSavepointError" and "state=op/count" in out["error"], out
