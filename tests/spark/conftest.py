"""One local SparkSession for every Spark test (starting one takes seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    pytest.importorskip("pandas", reason="mapInArrow needs pandas: install pyspark[sql]")
    from pyref.spark import spark_session

    session = spark_session("local[2]", app_name="pyref-tests", **{
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
