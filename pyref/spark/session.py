"""A SparkSession ready for savepoints, classic or Spark Connect, and what pyref asks of one.

Every job of :mod:`pyref.spark` runs on either kind of session: it uses DataFrames only
(no ``sparkContext``, no RDDs), so the same code runs against a Spark Connect server.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from .datasource import register


def spark_session(master: str | None = "local[*]", app_name: str = "pyref", *, remote: str | None = None,
                  **conf: str) -> SparkSession:
    """Get or create a session on ``master``, or with ``remote`` a Spark Connect session
    (``sc://host:port``, or ``local[N]`` for a Connect server pyspark starts in this process),
    with ``format("savepoint")`` registered.

    Python workers run this interpreter unless PYSPARK_PYTHON says otherwise, so
    executors on this machine import the same pyref; on a cluster (or a Connect server)
    they need pyref's dependencies on their nodes and pyref itself there or shipped with
    the job (README, "On a Spark cluster").
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if remote and remote.startswith("sc://"):
        # Connect's own builder: pyspark's generic one refuses a client beside a classic session.
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        builder = ConnectSession.builder.remote(remote)
    else:
        builder = SparkSession.builder.remote(remote) if remote else SparkSession.builder.master(master)
    builder = builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (a client without a SparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks Spark runs at once by default (its ``defaultParallelism``, the
    partitions of a ``spark.range``), asked in a way Spark Connect answers too."""
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    # The partition ids as a column first: Spark refuses an aggregate over spark_partition_id().
    probe = spark.range(0, 1 << 16).selectExpr("spark_partition_id() AS p").agg({"p": "max"})
    return int(probe.first()[0]) + 1
