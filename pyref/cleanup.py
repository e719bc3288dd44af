"""Deleting the data files that interrupted writers left behind (spec/format.md §10.4).

A writer that dies before its commit leaves data files no manifest lists. Readers
never look at them, but they take space. Until a writer commits, its files look
exactly like such leftovers, so only files older than ``older_than`` are deleted
(24 hours by default, longer than any write should take). The manifest is read
again, under the commit lock where the storage has one, just before deleting: if
a writer committed meanwhile, nothing is deleted. Cleanup never waits for the lock:
a writer holding it is committing, so cleanup stops and deletes nothing. A writer
that finds its files gone at its commit refuses to publish (spec/format.md §10.4).

Stores without a commit lock (object stores, HDFS) cannot exclude a writer while
cleanup deletes. There the age rule carries the safety (spec/format.md §10.5):
writers publish only files younger than their deadline, cleanup deletes only files
older than that deadline plus a margin, and it reads ``_manifest`` again at most
:data:`RECHECK_S` seconds before each deletion.

Files of other savepoints are never touched: only ``data/`` of this one is listed,
and a savepoint's own files are those its manifest lists with ``base = 0``.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .errors import ConcurrentWriteError, InvalidArgumentError
from .io import (
    DATA_DIR,
    MANIFEST_NAME,
    UNLOCKED_CLEAN_MARGIN_S,
    UNLOCKED_WRITE_DEADLINE_S,
    SavepointIO,
    is_data_file_path,
    open_io,
)
from .reader import read_committed

#: Unreferenced files younger than this may belong to a writer still at work.
DEFAULT_OLDER_THAN = 24 * 3600.0
#: The least ``older_than`` on a store without a commit lock (spec/format.md §10.5).
UNLOCKED_MIN_OLDER_THAN = UNLOCKED_WRITE_DEADLINE_S + UNLOCKED_CLEAN_MARGIN_S
#: Without a lock, how long a reading of ``_manifest`` vouches for the deletions after it.
RECHECK_S = 60.0


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

    def to_dict(self) -> dict[Any, Any]:
        return asdict(self)


def remove_unreferenced_files(location: str | os.PathLike[str] | SavepointIO, *,
                              older_than: float = DEFAULT_OLDER_THAN, dry_run: bool = False,
                              now: float | None = None) -> CleanupReport:
    """Delete the files in the savepoint's ``data/`` that its manifest does not list
    and that were last modified more than ``older_than`` seconds before ``now``."""
    check_cleanup_arguments(older_than, now)
    io = open_io(location)
    if not io.has_commit_lock:
        check_unlocked_age(io, older_than, dry_run)
    seen, manifest, _ = read_committed(io)
    own = {f.path for f in manifest.data_files if f.base == 0}
    candidates = [rel for rel in io.list_files(DATA_DIR) if rel not in own and is_data_file_path(rel)]
    return sweep(io, candidates, older_than=older_than, dry_run=dry_run, now=now,
                 still_current=lambda deleted: check_unchanged(io, MANIFEST_NAME, seen, deleted))


def check_cleanup_arguments(older_than: float, now: float | None) -> None:
    # A NaN passes every comparison as False: it would make every file "old enough".
    if isinstance(older_than, bool) or not isinstance(older_than, (int, float)) \
            or not math.isfinite(older_than) or older_than < 0:
        raise InvalidArgumentError(f"older_than must be a finite number of seconds >= 0, got {older_than!r}")
    if now is not None and (isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now)):
        raise InvalidArgumentError(f"now must be a finite time in seconds, got {now!r}")


def check_unlocked_age(io: SavepointIO, older_than: float, dry_run: bool) -> None:
    """Where no lock excludes a writer, only the age rule keeps its files safe (spec/format.md §10.5)."""
    if not dry_run and older_than < UNLOCKED_MIN_OLDER_THAN:
        raise InvalidArgumentError(
            f"older_than={older_than:g} s is below {UNLOCKED_MIN_OLDER_THAN:g} s: on a store without a commit lock a "
            "writer may still publish files that young (spec/format.md §10.5)", path=io.location)


def sweep(io: SavepointIO, candidates: list[str], *, older_than: float, dry_run: bool, now: float | None,
          still_current: Callable[[int], None], locked: bool = True) -> CleanupReport:
    """Delete the ``candidates`` (files nothing committed names) last modified more than
    ``older_than`` seconds before ``now``. ``still_current(deleted)`` raises if a writer
    committed since the candidates were found; it runs before the first deletion, under
    the commit lock where the store has one and ``locked`` asks for it, and without a lock
    again every :data:`RECHECK_S`."""
    cutoff = (time.time() if now is None else now) - older_than
    report = CleanupReport(io.location, dry_run)
    old: list[tuple[str, int]] = []
    for rel in candidates:
        found = io.stat(rel)
        if found is None:
            continue  # deleted meanwhile (by a writer's abort or another cleanup)
        if found.modified is None or found.modified > cutoff:
            report.kept_recent.append(io.describe(rel))
        else:
            old.append((rel, found.size))
    if old and not dry_run:
        lock = io.commit_lock("pyref clean", wait=0) if locked else contextlib.nullcontext()
        with lock:
            checked = time.monotonic()
            still_current(0)
            for done, (rel, _) in enumerate(old):
                if not (locked and io.has_commit_lock) and time.monotonic() - checked > RECHECK_S:
                    checked = time.monotonic()
                    still_current(done)
                io.delete(rel)
    report.deleted = [io.describe(rel) for rel, _ in old]
    report.deleted_bytes = sum(size for _, size in old)
    return report


def check_unchanged(io: SavepointIO, rel: str, seen: bytes | None, deleted: int) -> None:
    """Refuse to go on if ``rel`` (the file whose publication commits a writer's files) is
    no longer ``seen``: a writer committed since (``deleted`` files are gone already)."""
    if io.read_if_present(rel) != seen:
        done = f"only {deleted} of the old files were deleted" if deleted else "nothing was deleted"
        raise ConcurrentWriteError(f"{rel} was replaced while looking for unreferenced files; {done} (run again)",
                                   path=io.describe(rel))
