"""pyref on Apache Spark (pyspark >= 4.0): savepoints as DataFrames, bootstrap, rescale,
max-parallelism change and serializer migration at scale.

- :mod:`~pyref.spark.datasource`: ``spark.read.format("savepoint")`` and ``"savepoint-metadata"``;
  :mod:`~pyref.spark.sink`: ``df.write.format("savepoint")``.
- :mod:`~pyref.spark.frames`: :func:`read_state`, the same read as ``mapInArrow`` tasks (faster).
- :mod:`~pyref.spark.writer`: :class:`SavepointBuilder`, bootstrap from DataFrames and edits.
- :mod:`~pyref.spark.jobs`: :func:`rescale`, :func:`change_max_parallelism`, :func:`migrate_state`.
- :mod:`~pyref.spark.flink`: :func:`import_flink` (a Flink savepoint imported in parallel) and
  :func:`read_flink_state` (a Flink savepoint's states as DataFrames).
- :mod:`~pyref.spark.cli`: the ``pyref`` subcommands that run them.

Every read, write and job runs on a classic session or a Spark Connect session alike
(DataFrames only, no ``sparkContext``: :mod:`~pyref.spark.session`).

Hashing, encoding, chunking and redistribution are the core's (:mod:`pyref`);
this package only distributes them. Names resolve lazily, so ``pyref.spark.cli``
can register its subcommands without importing pyspark.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "SavepointDataSource": "datasource",
    "SavepointMetadataDataSource": "datasource",
    "register": "datasource",
    "read_state": "frames",
    "SavepointBuilder": "writer",
    "WriteOptions": "commit",
    "Progress": "progress",
    "rescale": "jobs",
    "change_max_parallelism": "jobs",
    "migrate_state": "jobs",
    "spark_session": "session",
    "import_flink": "flink",
    "read_flink_state": "flink",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
