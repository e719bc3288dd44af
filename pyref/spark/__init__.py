"""pyref on Apache Spark (pyspark >= 4.0): savepoints as DataFrames, bootstrap, rescale,
max-parallelism change and serializer migration at scale.

- :mod:`~pyref.spark.datasource`: ``spark.read.format("savepoint")`` and ``"savepoint-metadata"``;
  :mod:`~pyref.spark.sink`: ``df.write.format("savepoint")``.
- :mod:`~pyref.spark.frames`: :func:`read_state`, the same read as ``mapInArrow`` tasks (faster).
- :mod:`~pyref.spark.writer`: :class:`SavepointBuilder`, bootstrap from DataFrames and edits.
- :mod:`~pyref.spark.jobs`: :func:`rescale`, :func:`flatten`, :func:`change_max_parallelism`,
  :func:`migrate_state`.
- :mod:`~pyref.spark.flink_export`: :func:`export_flink`, a savepoint as a canonical Flink savepoint.
- :mod:`~pyref.spark.flink`: :func:`import_flink` (a Flink savepoint imported in parallel) and
  :func:`read_flink_state` (a Flink savepoint's states as DataFrames).
- :mod:`~pyref.spark.cli`: the ``pyref`` subcommands that run them.
- :mod:`~pyref.spark.task_errors`: :func:`typed_errors`, a pyref error raised in a Spark task
  re-raised on the driver as itself (the builder, the jobs and the CLI do this already).

Every read, write and job runs on a classic session or a Spark Connect session alike
(DataFrames only, no ``sparkContext``: :mod:`~pyref.spark.session`).

Hashing, encoding, chunking and redistribution are the core's (:mod:`pyref`);
this package only distributes them. Names resolve lazily, so ``pyref.spark.cli``
can register its subcommands without importing pyspark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "SavepointDataSource": "datasource",
    "SavepointMetadataDataSource": "datasource",
    "register": "datasource",
    "read_state": "frames",
    "SavepointBuilder": "writer",
    "WriteOptions": "commit",
    "Progress": "progress",
    "rescale": "jobs",
    "flatten": "jobs",
    "change_max_parallelism": "jobs",
    "migrate_state": "jobs",
    "spark_session": "session",
    "typed_errors": "task_errors",
    "export_flink": "flink_export",
    "import_flink": "flink",
    "read_flink_state": "flink",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # what a type checker sees of the lazy names below (pyspark types included)
    from .commit import WriteOptions as WriteOptions
    from .datasource import SavepointDataSource as SavepointDataSource
    from .datasource import SavepointMetadataDataSource as SavepointMetadataDataSource
    from .datasource import register as register
    from .flink import import_flink as import_flink
    from .flink_export import export_flink as export_flink
    from .flink import read_flink_state as read_flink_state
    from .frames import read_state as read_state
    from .jobs import change_max_parallelism as change_max_parallelism
    from .jobs import flatten as flatten
    from .jobs import migrate_state as migrate_state
    from .jobs import rescale as rescale
    from .progress import Progress as Progress
    from .session import spark_session as spark_session
    from .task_errors import typed_errors as typed_errors
    from .writer import SavepointBuilder as SavepointBuilder


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
