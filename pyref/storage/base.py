"""The small interface every storage implements, and the path rules they share.

A :class:`SavepointIO` is the files of one savepoint directory (on object stores:
one key prefix). Readers, writers, derivations and cleanup use nothing else, so a
backend is one module: :mod:`.local` (local files), :mod:`.object_store` (S3, GCS,
Azure through obstore), :mod:`.arrow_fs` (HDFS through pyarrow.fs).

Every relative path passes :func:`check_relative_path` (spec/format.md §6.2);
failures of the storage become typed errors: a path that cannot be resolved is
*corrupt*, any other failure a :class:`StorageError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import NamedTuple
from urllib.parse import quote, unquote_to_bytes

from ..errors import ConcurrentWriteError, CorruptSavepointError, SavepointError, SavepointNotFoundError, StorageError
from ..parallel import WORKERS

MANIFEST_NAME = "_manifest"
LOCK_NAME = ".lock"
DATA_DIR = "data"
#: How long a writer waits for the commit lock (held by another commit or by
#: ``pyref clean``) before it gives up (spec/format.md §10.2 step 3).
LOCK_WAIT_S = 30.0
#: On a store without a commit lock, a writer publishes only while every data file of its
#: own is younger than this, by the store's clock (spec/format.md §10.5).
UNLOCKED_WRITE_DEADLINE_S = 12 * 3600.0
#: ... and a cleanup deletes only files older than the deadline plus this margin, which
#: covers clock skew and the time a manifest write may still take (spec/format.md §10.5).
UNLOCKED_CLEAN_MARGIN_S = 3600.0
#: errno values saying a path does not lead to a file: the directory is malformed,
#: the storage works.
_UNRESOLVABLE = frozenset({errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG, errno.EISDIR, errno.EEXIST})


def typed_os_error(exc: OSError, what: str, path: str) -> SavepointError:
    """The typed error for an ``OSError`` met doing ``what`` on ``path``."""
    if isinstance(exc, SavepointError):
        return exc
    if exc.errno in _UNRESOLVABLE:
        return CorruptSavepointError(f"{what}: the path cannot be resolved ({exc.strerror})", path=path)
    return StorageError(f"{what}: {exc.strerror or exc}", path=path)


@contextlib.contextmanager
def typed_os_errors(what: str, path: str) -> Iterator[None]:
    """Turn any ``OSError`` raised inside into :func:`typed_os_error`."""
    try:
        yield
    except SavepointError:
        raise
    except OSError as exc:
        raise typed_os_error(exc, what, path) from exc


def is_data_file_path(rel: str) -> bool:
    """Whether ``rel`` names a file directly in ``data/``: the only files a writer or a
    cleanup may ever delete (spec/format.md §10.3). ``_manifest``, ``.lock`` and
    temporary manifests are never such a file, nor a name no savepoint may list (``x:y``,
    ``a\\b`` copied in by another tool: a cleanup leaves them, rather than failing on them)."""
    directory, _, name = rel.partition("/")
    return directory == DATA_DIR and bool(name) and "/" not in name and is_safe_relative_path(rel)


def is_safe_relative_path(path: str) -> bool:
    """Whether ``path`` stays inside the directory it is relative to (spec/format.md §6.2)."""
    return not (not path or path.startswith("/") or "\\" in path or "\x00" in path or ":" in path
                or any(s in ("", ".", "..") for s in path.split("/")))


def listed_name(rel_dir: str, name: str) -> str:
    """The relative path of the file ``name`` listed in ``rel_dir`` (``""``: the directory itself)."""
    return f"{rel_dir}/{name}" if rel_dir else name


def check_relative_path(path: str, *, what: str = "path") -> str:
    """Refuse any path that could leave the directory it is relative to."""
    if not is_safe_relative_path(path):
        raise CorruptSavepointError(f"{what} {path!r} is not a safe relative path (spec/format.md §6)")
    return path


def is_directory_name(name: str) -> bool:
    """Whether ``name`` can name a base: one safe path segment (spec/format.md §8.1)."""
    return bool(name) and not any(c in name for c in "/\\\x00:") and name not in (".", "..")


def check_directory_name(name: str) -> str:
    """A base savepoint is named by one path segment: a sibling directory."""
    if not is_directory_name(name):
        raise CorruptSavepointError(f"base directory {name!r} is not a single safe path segment (spec/format.md §8)")
    return name


class FileStat(NamedTuple):
    """What a storage says about one file: its length, and its last modification in
    seconds since the epoch (None where the storage does not say)."""

    size: int
    modified: float | None


class OutputFile(ABC):
    """A new file being written; :meth:`close` makes it durable."""

    path: str

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def tell(self) -> int: ...

    @abstractmethod
    def close(self) -> None: ...


def changed_since_start(rel: str, path: str) -> ConcurrentWriteError:
    """What :meth:`SavepointIO.commit_file` raises when ``rel`` is no longer what the writer read."""
    what = "committed (the manifest changed)" if rel == MANIFEST_NAME else f"published {rel}"
    return ConcurrentWriteError(f"another writer {what} since this writer started; nothing was committed", path=path)


class SavepointIO(ABC):
    """The files of one savepoint directory."""

    location: str
    #: Whether :meth:`commit_lock` excludes other processes. Without it (object stores,
    #: HDFS) commits rely on the conditional manifest write and the age rules of
    #: spec/format.md §10.5.
    has_commit_lock: bool = False
    #: Reads a reader keeps in flight: as many as cores by default, one for local files
    #: (LocalIO), more where each read waits on the network (object stores).
    read_concurrency: int = WORKERS

    @abstractmethod
    def stat(self, rel: str) -> FileStat | None:
        """Length and modification time of a file, or None if it does not exist."""

    def absence_hint(self) -> str:
        """For a *not found* error where nothing is at this location: why, if the store can
        say (``"; the bucket (container) does not exist"``), else ``""``. Never fails."""
        return ""

    def size(self, rel: str) -> int | None:
        """Length of a file, or None if it does not exist."""
        found = self.stat(rel)
        return None if found is None else found.size

    def modified(self, rel: str) -> float | None:
        """Last modification of a file in seconds since the epoch; None if it does not exist or
        the storage does not say."""
        found = self.stat(rel)
        return None if found is None else found.modified

    @abstractmethod
    def read_range(self, rel: str, offset: int, length: int) -> bytes: ...

    def file_identity(self, rel: str) -> object | None:
        """What tells two names of one file apart from two files (links), or None where
        names are the only identity (object stores)."""
        return None

    def read_file(self, rel: str) -> bytes:
        size = self.size(rel)
        if size is None:
            raise SavepointNotFoundError("file does not exist", path=self.describe(rel))
        return self.read_range(rel, 0, size)

    def read_if_present(self, rel: str) -> bytes | None:
        """:meth:`read_file`, or None when ``rel`` does not exist (what a conditional commit compares)."""
        try:
            return self.read_file(rel)
        except SavepointNotFoundError:
            return None

    @abstractmethod
    def create(self, rel: str) -> OutputFile:
        """Create a new file; fails if it exists."""

    @abstractmethod
    def delete(self, rel: str) -> None: ...

    @abstractmethod
    def list_files(self, rel_dir: str) -> list[str]:
        """Relative paths of the files directly inside ``rel_dir`` (``""``: the directory
        itself; empty if missing)."""

    @abstractmethod
    def replace_file(self, rel: str, data: bytes) -> None:
        """Make ``data`` the whole file ``rel``, created or replaced in one step: a reader sees
        the old file or the new one, never a part (on HDFS, best effort: a rename)."""

    def commit_lock(self, purpose: str = "a writer's commit",
                    wait: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Held while the manifest changes, so that no commit interleaves (spec/format.md §10.2).
        Waits up to ``wait`` seconds (default: the storage's own bound) for another holder,
        then raises :class:`ConcurrentWriteError` naming it; ``purpose`` is what others see
        while this one holds it. Re-entrant within one IO. Without a lock primitive
        (object stores, HDFS: :attr:`has_commit_lock` is False) it holds nothing."""
        return contextlib.nullcontext()

    def commit_manifest(self, data: bytes, expected_previous: bytes | None) -> None:
        """Atomically make ``data`` the manifest, if the current one is still ``expected_previous``.

        Raises :class:`ConcurrentWriteError` when it is not, having published nothing;
        any other error leaves the outcome unknown (the manifest may be published).
        """
        self.commit_file(MANIFEST_NAME, data, expected_previous)

    @abstractmethod
    def commit_file(self, rel: str, data: bytes, expected_previous: bytes | None) -> None:
        """:meth:`commit_manifest` for the file ``rel``: make ``data`` the whole file in one step
        if the file is still ``expected_previous`` (None: absent), else raise
        :class:`ConcurrentWriteError` having written nothing. What publishes a savepoint (the
        manifest; a Flink export's ``_metadata``) goes through it, so that of two writers racing
        for one directory exactly one succeeds and the other is told."""

    @abstractmethod
    def sibling(self, name: str) -> SavepointIO:
        """The savepoint directory ``name`` beside this one (for bases)."""

    @abstractmethod
    def parent_key(self) -> str:
        """Identifies the parent directory, to tell whether two savepoints are siblings."""

    @abstractmethod
    def store_key(self) -> str:
        """Identifies the store (bucket, container, namespace; one for all local files): a
        base named by a path is resolved inside the store of the savepoint naming it."""

    @abstractmethod
    def store_path(self) -> str:
        """This directory's path from the root of its store, without a leading ``/``: what
        a savepoint that is not a sibling records as its base's path (spec/format.md §8.1)."""

    @abstractmethod
    def at_store_path(self, path: str) -> SavepointIO:
        """The savepoint directory at ``path`` (a safe relative path, spec/format.md §6.2)
        from the root of this savepoint's store."""

    @property
    def name(self) -> str:
        """The savepoint directory's own name: what a shallow savepoint derived from it
        records as its base (spec/format.md §8.1)."""
        return self.location.rstrip("/").rsplit("/", 1)[-1]

    def describe(self, rel: str) -> str:
        return f"{self.location.rstrip('/')}/{rel}"

    def _whole(self, rel: str, offset: int, length: int, data: bytes) -> bytes:
        """``data``, if a read of ``length`` bytes at ``offset`` got all of them."""
        if len(data) != length:
            raise self._short(rel, offset, length, offset + len(data))
        return data

    def _short(self, rel: str, offset: int, length: int, end: int) -> CorruptSavepointError:
        """The error for a read of ``length`` bytes at ``offset`` of a file that ends at ``end``."""
        return CorruptSavepointError(f"file ends after {end} bytes; needed {offset + length}",
                                     path=self.describe(rel), byte_range=(offset, offset + length))


class UrlSavepointIO(SavepointIO):
    """A savepoint named by a URL ``scheme://authority/path``: its name is the last path
    segment, percent-decoded; its store is ``scheme://authority``; a sibling or a base
    named by a path is a URL in that store, its segments percent-encoded again."""

    @abstractmethod
    def _open(self, location: str) -> UrlSavepointIO:
        """Another savepoint directory of this store, with this one's options."""

    def parent_key(self) -> str:
        return self.location.rsplit("/", 1)[0]

    @property
    def name(self) -> str:
        return os.fsdecode(unquote_to_bytes(super().name))

    def sibling(self, name: str) -> SavepointIO:
        check_directory_name(name)
        return self._open(f"{self.parent_key()}/{quote(name)}")

    def store_key(self) -> str:
        scheme, rest = self.location.split("://", 1)
        return f"{scheme}://{rest.split('/', 1)[0]}"

    def store_path(self) -> str:
        return os.fsdecode(unquote_to_bytes(self.location[len(self.store_key()) + 1:]))

    def at_store_path(self, path: str) -> SavepointIO:
        check_relative_path(path, what="base path")
        return self._open(f"{self.store_key()}/{quote(path)}")
