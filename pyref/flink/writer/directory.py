"""The directory of a Flink savepoint being written, and its commit.

Flink takes a directory for a savepoint when it holds a ``_metadata`` file, and
finds every state file through it. So the state files are written first, each to
its final name (a random UUID, as Flink names them, relative to the directory),
and ``_metadata`` last, in one step (``SavepointIO.commit_file``: on local disks
written aside, flushed and renamed; on object stores one conditional PUT), and only if
no other export published one meanwhile. Until then nothing
here is a savepoint; after it, the savepoint is complete. The directory is a local
path or a URL (``s3://``, ``gs://``, ``az://``, ``hdfs://``). A failed export deletes the state
files it wrote and leaves ``_metadata`` (the previous savepoint's, if one was being
replaced) as it was.

A state stream small enough (``inline_bytes``, Flink's
``execution.checkpointing.data-inline-threshold``, 20 KiB by default) stays in
memory and goes inline into ``_metadata``, as Flink does.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...errors import ConcurrentWriteError, CorruptSavepointError, InvalidArgumentError, SavepointError, StorageError
from ...location import parse_location
from ...storage import (
    UNLOCKED_WRITE_DEADLINE_S,
    OutputFile,
    SavepointIO,
    is_safe_relative_path,
    open_io,
    refuse_non_directory_target,
    typed_os_errors,
)
from ..metadata import parse_metadata

__all__ = ["StreamRef", "StateStream", "ExportDirectory", "DEFAULT_INLINE_BYTES", "METADATA", "EXPORT_FILE_NAME",
           "check_metadata_parses", "relative_files"]

METADATA = "_metadata"
#: Flink's default execution.checkpointing.data-inline-threshold.
DEFAULT_INLINE_BYTES = 20 * 1024
_PYREF_MANIFEST = "_manifest"
#: What a state stream gathers before each write to its file.
WRITE_BYTES = 1 << 20
#: The name of every state file an export writes: its export's prefix (``pyref-`` and 12 hex
#: digits), then a UUID. Flink's own files (a bare UUID) never match, so cleanup never takes them.
EXPORT_FILE_NAME = re.compile(r"pyref-[0-9a-f]{12}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass(frozen=True)
class StreamRef:
    """Where a state stream ended up: inline (``data``) or a file of the directory
    (``name``, relative) of ``size`` bytes."""

    name: str
    size: int
    data: bytes | None = field(default=None, repr=False)

    @property
    def inline(self) -> bool:
        return self.data is not None


class StateStream:
    """One state handle's stream: kept in memory up to ``inline_bytes``, then a file
    of the export directory ``io`` named by its export's ``file_prefix`` and a fresh UUID
    (Flink names its state files by a UUID and finds them only through ``_metadata``)."""

    def __init__(self, io: SavepointIO, file_prefix: str, inline_bytes: int) -> None:
        self.io = io
        self.inline_bytes = inline_bytes
        self.name = f"{file_prefix}{uuid.uuid4()}"
        self._buffer = bytearray()
        self._file: OutputFile | None = None
        self._size = 0

    def tell(self) -> int:
        return self._size

    def write(self, data) -> None:
        data = memoryview(data).cast("B")  # bytes, memoryviews and numpy arrays alike
        self._buffer += data
        self._size += data.nbytes
        if len(self._buffer) > (WRITE_BYTES if self._file is not None else self.inline_bytes):
            self._flush()

    def _flush(self) -> None:
        """Write the buffer to the file, creating it first (many small writes become few)."""
        if self._file is None:
            self._file = self.io.create(self.name)
        self._file.write(bytes(self._buffer))
        self._buffer.clear()

    def close(self) -> StreamRef:
        """The finished stream: inline bytes, or the file complete (durable, or uploaded)."""
        if self._file is None:
            return StreamRef(self.name, self._size, bytes(self._buffer))
        self._flush()
        self._file.close()
        return StreamRef(self.name, self._size)

    def discard(self) -> None:
        """Delete what was written (best effort)."""
        if self._file is not None:
            with contextlib.suppress(SavepointError, OSError):
                self._file.close()
            with contextlib.suppress(SavepointError, OSError):
                self.io.delete(self.name)


class ExportDirectory:
    """The target directory, a local path or a URL pyref's storage serves: checked before
    anything is written, committed by :meth:`commit`, cleaned by :meth:`abort`."""

    def __init__(self, location: str, *, overwrite: bool = False) -> None:
        parsed = parse_location(location)
        self.path = os.path.abspath(parsed.path) if parsed.is_local else location.rstrip("/")
        self.io = open_io(self.path)
        refuse_non_directory_target(self.io, "export target")
        if self.io.stat(_PYREF_MANIFEST) is not None:
            raise InvalidArgumentError("the export target holds a pyref savepoint; export to another directory",
                                       path=self.path)
        self.previous = self._previous_metadata(overwrite)
        self.created = parsed.is_local and not os.path.isdir(self.path)
        if parsed.is_local:
            with typed_os_errors("cannot prepare the export directory", self.path):
                os.makedirs(self.path, exist_ok=True)
        #: Starts the name of every state file of this export (its Spark tasks' too), so that an
        #: abort deletes those and never another export's into the same directory.
        self.file_prefix = f"pyref-{uuid.uuid4().hex[:12]}-"
        #: Set once ``_metadata`` is in place: from then on nothing may be removed.
        self.published = False

    def _previous_metadata(self, overwrite: bool) -> bytes | None:
        if self.io.stat(METADATA) is None:
            return None
        if not overwrite:
            raise InvalidArgumentError("a Flink savepoint (_metadata) already exists here; pass overwrite=True "
                                       "(--overwrite) to replace it", path=self.path)
        return self.io.read_file(METADATA)

    def commit(self, metadata: bytes, files: Mapping[str, int]) -> None:
        """Publish ``_metadata`` (the savepoint is complete from here on), then delete the
        replaced savepoint's state files that ``files`` (the new ones, by name, with their
        sizes) does not list."""
        self._check_files(files)
        try:
            # Conditional: of two exports racing for this directory one publishes, the other is
            # refused (ConcurrentWriteError) and its abort deletes only its own files.
            self.io.commit_file(METADATA, metadata, self.previous)
        except StorageError:
            # A write that may have landed (an upload whose answer was lost): complete if it did.
            if self.io.read_if_present(METADATA) != metadata:
                raise
        self.published = True
        self._delete_replaced(set(files))

    def _check_files(self, files: Mapping[str, int]) -> None:
        """Every state file is still there, whole, and young enough that no ``pyref clean``
        may take it for an abandoned export's (pyref/flink/writer/cleanup.py): the same age
        rule as a commit to an object store (spec/format.md §10.5)."""
        oldest = time.time() - UNLOCKED_WRITE_DEADLINE_S
        for name, size in files.items():
            found = self.io.stat(name)
            if found is None or found.size != size:
                state = "is missing" if found is None else f"is {found.size} bytes, not {size}"
                raise ConcurrentWriteError(f"state file {name} of this export {state}: another process (pyref "
                                           "clean?) deleted or changed it; nothing was published", path=self.path)
            if found.modified is not None and found.modified < oldest:
                raise ConcurrentWriteError(
                    f"state file {name} of this export was written more than {UNLOCKED_WRITE_DEADLINE_S / 3600:g} "
                    "hours ago; pyref clean may delete it as an abandoned export's, so nothing was published: run "
                    "the export again", path=self.path)

    def _delete_replaced(self, keep: set[str]) -> None:
        if self.previous is None:
            return
        try:
            old = parse_metadata(self.previous)
        except SavepointError:
            return  # unreadable: leave its files alone
        for name in relative_files(old):
            if name not in keep and is_safe_relative_path(name) and "/" not in name and name != METADATA:
                with contextlib.suppress(SavepointError, OSError):
                    self.io.delete(name)

    def abort(self) -> None:
        """Delete every state file of this export (:attr:`file_prefix`: those of failed Spark
        tasks too, never a concurrent export's); remove the directory if this export created
        it and it is empty again. Nothing, once ``_metadata`` was published."""
        if self.published:
            return
        with contextlib.suppress(SavepointError, OSError):
            for name in self.io.list_files(""):
                if name.startswith(self.file_prefix):
                    with contextlib.suppress(SavepointError, OSError):
                        self.io.delete(name)
            if self.created and not os.listdir(self.path):
                os.rmdir(self.path)


def relative_files(metadata) -> list[str]:
    """The relative state files a parsed ``_metadata`` names."""
    names = []
    for op in metadata.operators:
        for sub in op.subtasks:
            for handle in (sub.managed_operator_state, sub.raw_operator_state, sub.managed_keyed_state,
                           sub.raw_keyed_state):
                stream = getattr(handle, "stream", None)
                if stream is not None and stream.kind == "relative-file":
                    names.append(stream.location)
    return names


def check_metadata_parses(metadata: bytes, path: str) -> None:
    """Never publish what Flink's format reader would refuse: parse it back first."""
    try:
        parse_metadata(metadata, path)
    except SavepointError as exc:
        raise CorruptSavepointError(f"the _metadata written does not parse back ({exc.reason}); nothing was "
                                    "published", path=path) from None
