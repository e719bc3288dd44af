"""The directory of a Flink savepoint being written, and its commit.

Flink takes a directory for a savepoint when it holds a ``_metadata`` file, and
finds every state file through it. So the state files are written first, each to
its final name (a random UUID, as Flink names them, relative to the directory),
and ``_metadata`` last: written to a temporary name, flushed to disk, then renamed
over ``_metadata`` in one atomic step. Until that rename nothing here is a
savepoint; after it, the savepoint is complete. A failed export deletes the state
files it wrote and leaves ``_metadata`` (the previous savepoint's, if one was being
replaced) as it was.

A state stream small enough (``inline_bytes``, Flink's
``execution.checkpointing.data-inline-threshold``, 20 KiB by default) stays in
memory and goes inline into ``_metadata``, as Flink does.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass, field
from typing import BinaryIO

from ...errors import CorruptSavepointError, InvalidArgumentError, SavepointError
from ...io import typed_os_errors
from ...storage.local import _fsync_dir
from ..metadata import parse_metadata

__all__ = ["StreamRef", "StateStream", "ExportDirectory", "DEFAULT_INLINE_BYTES", "METADATA", "check_metadata_parses"]

METADATA = "_metadata"
#: Flink's default execution.checkpointing.data-inline-threshold.
DEFAULT_INLINE_BYTES = 20 * 1024
_PYREF_MANIFEST = "_manifest"


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
    of ``directory`` named by a fresh UUID (what Flink's savepoints name them)."""

    def __init__(self, directory: str, inline_bytes: int) -> None:
        self.directory = directory
        self.inline_bytes = inline_bytes
        self.name = str(uuid.uuid4())
        self._buffer = bytearray()
        self._file: BinaryIO | None = None
        self._size = 0

    def tell(self) -> int:
        return self._size

    def write(self, data) -> None:
        data = memoryview(data).cast("B")  # bytes, memoryviews and numpy arrays alike
        size = data.nbytes
        if self._file is None and len(self._buffer) + size > self.inline_bytes:
            self._spill()
        if self._file is None:
            self._buffer += data
        else:
            with typed_os_errors("cannot write a state file", self.path):
                self._file.write(data)
        self._size += size

    @property
    def path(self) -> str:
        return os.path.join(self.directory, self.name)

    def _spill(self) -> None:
        with typed_os_errors("cannot create a state file", self.path):
            self._file = open(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "wb", buffering=1 << 20)
            self._file.write(self._buffer)
        self._buffer = bytearray()

    def close(self) -> StreamRef:
        """The finished stream: inline bytes, or the file flushed to disk."""
        if self._file is None:
            return StreamRef(self.name, self._size, bytes(self._buffer))
        with typed_os_errors("cannot write a state file", self.path):
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        return StreamRef(self.name, self._size)

    def discard(self) -> None:
        """Delete what was written (best effort)."""
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            with contextlib.suppress(OSError):
                os.unlink(self.path)


class ExportDirectory:
    """The target directory: checked before anything is written, committed by
    :meth:`commit`, cleaned by :meth:`abort`."""

    def __init__(self, path: str, *, overwrite: bool = False) -> None:
        self.path = os.path.abspath(path)
        with typed_os_errors("cannot prepare the export directory", self.path):
            if os.path.exists(self.path) and not os.path.isdir(self.path):
                raise InvalidArgumentError("the export target exists and is not a directory", path=self.path)
            if os.path.exists(os.path.join(self.path, _PYREF_MANIFEST)):
                raise InvalidArgumentError("the export target holds a pyref savepoint; export to another directory",
                                           path=self.path)
            self.previous = self._previous_metadata(overwrite)
            self.created = not os.path.isdir(self.path)
            os.makedirs(self.path, exist_ok=True)
            self.present_before = set(os.listdir(self.path))
        #: Set once ``_metadata`` is in place: from then on nothing may be removed.
        self.published = False

    def _previous_metadata(self, overwrite: bool) -> bytes | None:
        metadata = os.path.join(self.path, METADATA)
        if not os.path.exists(metadata):
            return None
        if not overwrite:
            raise InvalidArgumentError("a Flink savepoint (_metadata) already exists here; pass overwrite=True "
                                       "(--overwrite) to replace it", path=self.path)
        with open(metadata, "rb") as f:
            return f.read()

    def commit(self, metadata: bytes, files: list[str]) -> None:
        """Publish ``_metadata`` (the savepoint is complete from here on), then delete the
        replaced savepoint's state files that ``files`` (the new ones) does not list."""
        temporary = os.path.join(self.path, f".{uuid.uuid4()}.metadata.inprogress")
        target = os.path.join(self.path, METADATA)
        with typed_os_errors("cannot write _metadata", target):
            try:
                with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "wb") as f:
                    f.write(metadata)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temporary, target)
                self.published = True
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
            _fsync_dir(self.path)
        self._delete_replaced(set(files))

    def _delete_replaced(self, keep: set[str]) -> None:
        if self.previous is None:
            return
        try:
            old = parse_metadata(self.previous)
        except SavepointError:
            return  # unreadable: leave its files alone
        for name in _relative_files(old):
            if name not in keep and os.sep not in name and name not in (METADATA, ".", ".."):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.path, name))

    def abort(self) -> None:
        """Delete every file that appeared since this export began (its state files,
        those of failed Spark tasks too); remove the directory if this export created
        it and it is empty again. Nothing, once ``_metadata`` was published."""
        if self.published:
            return
        with contextlib.suppress(OSError):
            for name in set(os.listdir(self.path)) - self.present_before:
                if name != METADATA:
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(self.path, name))
            if self.created and not os.listdir(self.path):
                os.rmdir(self.path)


def _relative_files(metadata) -> list[str]:
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
