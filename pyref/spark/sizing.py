"""Task counts and file sizes from the data size: the target file size of Spark writes.

A keyed state is shuffled by key group into write tasks, each writing its own data files.
Given a target file size, Spark's adaptive execution makes tasks of about that many
shuffled bytes: :func:`task_size` sets its advisory partition size for the duration of
the write job and turns off its "parallelism first" rule, which would otherwise cut small
data into one task per core whatever the target (more, smaller files). Shuffled bytes
(Spark's rows, compressed by its shuffle codec) are an estimate of the stored bytes, so
files are *about* the target size; none is larger (the writer's ``file_bytes``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ..errors import InvalidArgumentError
from .commit import WriteOptions

_ADVISORY = "spark.sql.adaptive.advisoryPartitionSizeInBytes"
_PARALLELISM_FIRST = "spark.sql.adaptive.coalescePartitions.parallelismFirst"


def check_target_file_bytes(target: Any) -> int | None:
    """``target`` if it is a whole number of bytes > 0 (or None: no target)."""
    if target is None:
        return None
    if isinstance(target, bool) or not isinstance(target, int) or target <= 0:
        raise InvalidArgumentError(f"target_file_bytes is a whole number of bytes > 0, got {target!r}")
    return target


def sized_options(options: WriteOptions | None, target: Any) -> tuple[WriteOptions, int | None]:
    """``options`` (default ones if None) with their data files capped at the checked
    ``target`` bytes when one is given, and that target (None: no target)."""
    options = options or WriteOptions()
    target = check_target_file_bytes(target)
    return (options if target is None else replace(options, file_bytes=target)), target


@contextmanager
def task_size(spark: Any, target_bytes: int | None) -> Iterator[None]:
    """Within the block, Spark's adaptive execution coalesces shuffled partitions into tasks
    of about ``target_bytes`` (None: as configured). Session settings, restored after: a
    job of another thread of the same session meanwhile sees them too."""
    if target_bytes is None:
        yield
        return
    wanted = {_ADVISORY: str(target_bytes), _PARALLELISM_FIRST: "false"}
    previous = {key: spark.conf.get(key, None) for key in wanted}
    for key, value in wanted.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
