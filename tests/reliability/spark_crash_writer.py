"""A Spark writer process to be killed: ``python spark_crash_writer.py PATH GENERATION ENTRIES [--kill-at CALL:N]``.

The same savepoint as crash_writer.py (same states, same values per generation),
built with pyref.spark.SavepointBuilder over PATH (overwrite=True): executor tasks
write the data files, the driver commits. Prints "ready" once the SparkSession is
up and "committed" after the commit. ``--kill-at`` arms the driver as in
crash_writer.py (the JVM and its Python workers die with the driver's process group).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from crash_writer import _arm  # noqa: E402


def main() -> None:
    path, generation, entries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    from pyref.serializers import Int64, String
    from pyref.spark import spark_session
    from pyref.spark.writer import SavepointBuilder

    spark = spark_session("local[2]", app_name="pyref-crash", **{
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    if len(sys.argv) > 5 and sys.argv[4] == "--kill-at":
        call, n = sys.argv[5].split(":")
        _arm(call, int(n))
    print("ready", flush=True)
    values = spark.range(entries).selectExpr("id AS key", f"id + {generation} * 1000000000 AS value")
    names = spark.range(entries // 4).selectExpr("id AS key", f"concat('g{generation}-', id) AS value")
    marks = spark.createDataFrame([(0, generation)] * 3, "subtask int, value long")
    with SavepointBuilder(spark, path, overwrite=True) as b:
        b.add_operator("op", parallelism=2, max_parallelism=128, key_serializer=Int64())
        b.add_keyed_state("op", "values", values, Int64())
        b.add_keyed_state("op", "names", names, String())
        b.add_list_state("op", "generation", marks, Int64())
    print("committed", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
