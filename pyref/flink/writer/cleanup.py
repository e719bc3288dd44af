"""Deleting the state files that interrupted exports to Flink left behind.

An export writes its state files first and ``_metadata`` last (:mod:`.directory`). One
that is killed (``kill -9``, a lost machine) cannot delete its files, and Flink never
looks at files its ``_metadata`` does not name, so they only take space. They are
recognised by name (:data:`~.directory.EXPORT_FILE_NAME`): only files an export of pyref
wrote are ever candidates, never Flink's own, and never one ``_metadata`` names.

No lock keeps an export and a cleanup apart (an export's commit is one conditional write
of ``_metadata``), so the age rule of spec/format.md §10.5 carries the safety on every
store: an export publishes only state files younger than ``UNLOCKED_WRITE_DEADLINE_S``,
cleanup deletes only older than that plus a margin, and reads ``_metadata`` again before
deleting (and every minute while it deletes): if an export published meanwhile, it stops.
"""

from __future__ import annotations

import os

from ...cleanup import (
    DEFAULT_OLDER_THAN,
    CleanupReport,
    check_cleanup_arguments,
    check_unchanged,
    check_unlocked_age,
    sweep,
)
from ...errors import SavepointError
from ...storage import MANIFEST_NAME, SavepointIO, open_io
from ..metadata import parse_metadata
from .directory import EXPORT_FILE_NAME, METADATA, relative_files

__all__ = ["remove_abandoned_export_files", "is_export_directory"]


def is_export_directory(location: str | os.PathLike[str]) -> bool:
    """Whether ``pyref clean`` cleans ``location`` as an export's target: no pyref manifest,
    and a Flink ``_metadata`` or state files an export wrote (one killed before its first
    publication leaves no ``_metadata``)."""
    try:
        io = open_io(location)
        if io.stat(MANIFEST_NAME) is not None:
            return False
        return io.stat(METADATA) is not None or any(EXPORT_FILE_NAME.fullmatch(n) for n in io.list_files(""))
    except SavepointError:
        return False


def remove_abandoned_export_files(location: str | os.PathLike[str] | SavepointIO, *,
                                  older_than: float = DEFAULT_OLDER_THAN, dry_run: bool = False,
                                  now: float | None = None) -> CleanupReport:
    """Delete the state files of exports to Flink that never published: files of the
    directory named as an export names them, that its ``_metadata`` (if any) does not
    name, and that were last modified more than ``older_than`` seconds before ``now``."""
    check_cleanup_arguments(older_than, now)
    io = open_io(location)
    check_unlocked_age(io, older_than, dry_run)
    seen = io.read_if_present(METADATA)
    named: set[str] = set()
    if seen is not None:
        try:
            named = set(relative_files(parse_metadata(seen, io.describe(METADATA))))
        except SavepointError as exc:
            # Which files it names is unknown: deleting any might break it.
            raise type(exc)(f"cannot tell which state files _metadata names ({exc.reason}); nothing was deleted",
                            path=io.describe(METADATA)) from None
    candidates = [name for name in io.list_files("") if EXPORT_FILE_NAME.fullmatch(name) and name not in named]
    return sweep(io, candidates, older_than=older_than, dry_run=dry_run, now=now,
                 still_current=lambda deleted: check_unchanged(io, METADATA, seen, deleted),
                 locked=False)  # pyref's lock file has no place in a Flink savepoint's directory
