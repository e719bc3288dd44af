"""A SparkSession ready for savepoints: Python workers on this interpreter, data sources registered."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from .datasource import register


def spark_session(master: str = "local[*]", app_name: str = "pyref", **conf: str) -> SparkSession:
    """Get or create a session on ``master`` with ``format("savepoint")`` registered.

    Python workers run this interpreter unless PYSPARK_PYTHON says otherwise, so
    executors on this machine import the same pyref; on a cluster they need pyref's
    dependencies on their nodes and pyref itself there or shipped with the job
    (README, "On a Spark cluster").
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
