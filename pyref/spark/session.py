"""A SparkSession ready for savepoints, classic or Spark Connect, and what pyref asks of one.

Every job of :mod:`pyref.spark` runs on either kind of session: it uses DataFrames only
(no ``sparkContext``, no RDDs), so the same code runs against a Spark Connect server.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.parse
from typing import TYPE_CHECKING, Union

from pyspark.errors import IllegalArgumentException
from pyspark.sql import SparkSession

from ..errors import InvalidArgumentError
from .datasource import register

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

#: A classic or a Spark Connect session: pyspark types them as unrelated classes.
AnySparkSession = Union[SparkSession, "ConnectSession"]
#: The port of an sc:// URL that names none (Spark Connect's default).
CONNECT_PORT = 15002


def spark_session(master: str | None = "local[*]", app_name: str = "pyref", *, remote: str | None = None,
                  **conf: str) -> AnySparkSession:
    """Get or create a session on ``master``, or with ``remote`` a Spark Connect session
    (``sc://host:port``, or ``local[N]`` for a Connect server pyspark starts in this process),
    with ``format("savepoint")`` registered.

    Python workers run this interpreter unless PYSPARK_PYTHON says otherwise, so
    executors on this machine import the same pyref; on a cluster (or a Connect server)
    they need pyref's dependencies on their nodes and pyref itself there or shipped with
    the job (README, "On a Spark cluster").
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder: SparkSession.Builder | ConnectSession.Builder
    if remote and remote.startswith("sc://"):
        # Connect's own builder: pyspark's generic one refuses a client beside a classic session.
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        _check_reachable(remote)
        builder = ConnectSession.builder.remote(remote)
    elif remote:
        builder = SparkSession.builder.remote(remote)
    elif master is None:
        # Spark itself would fail later, on the master URL 'None'.
        raise InvalidArgumentError("give a Spark master URL or a remote (Spark Connect) URL")
    else:
        builder = SparkSession.builder.master(master)
    builder = builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
        register(spark)  # sets a property: where Spark checks the ones given
    except IllegalArgumentException as exc:  # a property Spark refuses (a --conf value, say)
        raise InvalidArgumentError(f"Spark refused the session's configuration: {str(exc).splitlines()[0]}") from None
    return spark


def _check_reachable(remote: str) -> None:
    """A Connect client retries a server that does not answer for over ten minutes, saying
    nothing: refuse at once an address where nothing accepts a connection."""
    url = urllib.parse.urlsplit(remote)
    try:
        host, port = url.hostname or "localhost", url.port or CONNECT_PORT
    except ValueError as exc:  # a port that is not a number
        raise InvalidArgumentError(f"not a Spark Connect URL (sc://host:port): {exc}", path=remote) from None
    try:
        socket.create_connection((host, port), timeout=30).close()
    except OSError as exc:
        raise InvalidArgumentError(f"no Spark Connect server answers at {host}:{port}: {exc.strerror or exc}",
                                   path=remote) from None


def is_connect(spark: AnySparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (a client without a SparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: AnySparkSession) -> int:
    """How many tasks Spark runs at once by default (its ``defaultParallelism``, the
    partitions of a ``spark.range``), asked in a way Spark Connect answers too."""
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    # The partition ids as a column first: Spark refuses an aggregate over spark_partition_id().
    probe = spark.range(0, 1 << 16).selectExpr("spark_partition_id() AS p").agg({"p": "max"}).first()
    assert probe is not None  # a global aggregate has one row
    return int(probe[0]) + 1
