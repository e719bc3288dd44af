"""Deleting the data files that interrupted writers left behind (spec/format.md §10.4).

A writer that dies before its commit leaves data files no manifest lists. Readers
never look at them, but they take space. Until a writer commits, its files look
exactly like such leftovers, so only files older than ``older_than`` are deleted
(24 hours by default, longer than any write should take). The manifest is read
again, under the commit lock where the storage has one, just before deleting: if
a writer committed meanwhile, nothing is deleted. Cleanup never waits for the lock:
a writer holding it is committing, so cleanup stops and deletes nothing. A writer
that finds its files gone at its commit refuses to publish (spec/format.md §10.4).

Files of other savepoints are never touched: only ``data/`` of this one is listed,
and a savepoint's own files are those its manifest lists with ``base = 0``.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field

from .errors import ConcurrentWriteError, InvalidArgumentError
from .io import DATA_DIR, MANIFEST_NAME, SavepointIO, is_data_file_path, open_io
from .reader import read_committed

#: Unreferenced files younger than this may belong to a writer still at work.
DEFAULT_OLDER_THAN = 24 * 3600.0


@dataclass
class CleanupReport:
    """What :func:`remove_unreferenced_files` found; paths as the IO describes them."""

    location: str
    dry_run: bool
    #: Unreferenced and old enough: deleted (or, in a dry run, would be).
    deleted: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    #: Unreferenced but too recent (or of unknown age): left alone.
    kept_recent: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def remove_unreferenced_files(location: str | os.PathLike[str] | SavepointIO, *,
                              older_than: float = DEFAULT_OLDER_THAN, dry_run: bool = False,
                              now: float | None = None) -> CleanupReport:
    """Delete the files in the savepoint's ``data/`` that its manifest does not list
    and that were last modified more than ``older_than`` seconds before ``now``."""
    # A NaN passes every comparison as False: it would make every file "old enough".
    if isinstance(older_than, bool) or not isinstance(older_than, (int, float)) \
            or not math.isfinite(older_than) or older_than < 0:
        raise InvalidArgumentError(f"older_than must be a finite number of seconds >= 0, got {older_than!r}")
    if now is not None and (isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now)):
        raise InvalidArgumentError(f"now must be a finite time in seconds, got {now!r}")
    io = open_io(location)
    seen, manifest, _ = read_committed(io)
    own = {f.path for f in manifest.data_files if f.base == 0}
    cutoff = (time.time() if now is None else now) - older_than
    report = CleanupReport(io.location, dry_run)
    old: list[tuple[str, int]] = []
    for rel in io.list_files(DATA_DIR):
        if rel in own or not is_data_file_path(rel):
            continue
        modified = io.modified(rel)
        if modified is None or modified > cutoff:
            report.kept_recent.append(io.describe(rel))
        else:
            old.append((rel, io.size(rel) or 0))
    if old and not dry_run:
        with io.commit_lock("pyref clean", wait=0):
            if io.read_file(MANIFEST_NAME) != seen:
                raise ConcurrentWriteError("the savepoint was replaced while looking for unreferenced files; "
                                           "nothing was deleted (run again)", path=io.describe(MANIFEST_NAME))
            for rel, _ in old:
                io.delete(rel)
    report.deleted = [io.describe(rel) for rel, _ in old]
    report.deleted_bytes = sum(size for _, size in old)
    return report
