"""Storage behind a small interface: where a savepoint's files live.

:class:`LocalIO` serves local paths with the guarantees the spec asks of a writer
(fsync before commit, atomic rename of the manifest, an exclusive commit lock).
:class:`ArrowIO` serves any URI pyarrow.fs understands (``hdfs://``, ``s3://``,
``s3a://``, ``gs://``) for reading and for writers whose store makes a single-object
write atomic (spec/format.md §10).

Every relative path passes :func:`check_relative_path` and, locally, is resolved
without following a symlink out of the savepoint directory (spec/format.md §11).
The savepoint directory itself is resolved once (:mod:`pyref.location`).

Failures of the storage become typed errors: a path that cannot be resolved (through
a file, a link loop) is *corrupt*, any other ``OSError`` a :class:`StorageError`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from urllib.parse import quote, unquote_to_bytes

from .errors import (
    ConcurrentWriteError,
    CorruptSavepointError,
    SavepointError,
    SavepointNotFoundError,
    StorageError,
)
from .location import parse_location, resolve_local

MANIFEST_NAME = "_manifest"
LOCK_NAME = ".lock"
DATA_DIR = "data"
#: How long a writer waits for the commit lock (held by another commit or by
#: ``pyref clean``) before it gives up (spec/format.md §10.2 step 3).
LOCK_WAIT_S = 30.0
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
    temporary manifests are never such a file."""
    directory, _, name = rel.partition("/")
    return directory == DATA_DIR and bool(name) and "/" not in name


def check_relative_path(path: str, *, what: str = "path") -> str:
    """Refuse any path that could leave the directory it is relative to."""
    segments = path.split("/")
    if (not path or path.startswith("/") or "\\" in path or "\x00" in path or ":" in path
            or any(s in ("", ".", "..") for s in segments)):
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


class OutputFile(ABC):
    """A new file being written; :meth:`close` makes it durable."""

    path: str

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def tell(self) -> int: ...

    @abstractmethod
    def close(self) -> None: ...


class SavepointIO(ABC):
    """The files of one savepoint directory."""

    location: str

    @abstractmethod
    def size(self, rel: str) -> int | None:
        """Length of a file, or None if it does not exist."""

    @abstractmethod
    def modified(self, rel: str) -> float | None:
        """Last modification of a file in seconds since the epoch; None if it does not exist or
        the filesystem does not say."""

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

    @abstractmethod
    def create(self, rel: str) -> OutputFile:
        """Create a new file; fails if it exists."""

    @abstractmethod
    def delete(self, rel: str) -> None: ...

    @abstractmethod
    def list_files(self, rel_dir: str) -> list[str]:
        """Relative paths of the files directly inside ``rel_dir`` (empty if missing)."""

    def commit_lock(self, purpose: str = "a writer's commit",
                    wait: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Held while the manifest changes, so that no commit interleaves (spec/format.md §10.2).
        Waits up to ``wait`` seconds (default: the storage's own bound) for another holder,
        then raises :class:`ConcurrentWriteError` naming it; ``purpose`` is what others see
        while this one holds it. Re-entrant within one IO. Without a lock primitive
        (object stores) it holds nothing."""
        return contextlib.nullcontext()

    @abstractmethod
    def commit_manifest(self, data: bytes, expected_previous: bytes | None) -> None:
        """Atomically make ``data`` the manifest, if the current one is still ``expected_previous``.

        Raises :class:`ConcurrentWriteError` before writing anything when it is not;
        any other error leaves the outcome unknown (the manifest may be published).
        """

    @abstractmethod
    def sibling(self, name: str) -> SavepointIO:
        """The savepoint directory ``name`` beside this one (for bases)."""

    @abstractmethod
    def parent_key(self) -> str:
        """Identifies the parent directory, to tell whether two savepoints are siblings."""

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
            raise CorruptSavepointError(f"file ends after {offset + len(data)} bytes; needed {offset + length}",
                                        path=self.describe(rel), byte_range=(offset, offset + length))
        return data


class _LocalOutput(OutputFile):
    def __init__(self, full: str, rel: str) -> None:
        self.path = rel
        self._full = full
        with typed_os_errors("cannot create the file", full):
            self._fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self._pos = 0

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        with typed_os_errors(f"cannot write at byte {self._pos}", self._full):
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
                self._pos += n

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            with typed_os_errors("cannot make the file durable (fsync)", self._full):
                os.fsync(self._fd)
        finally:  # the descriptor is released even when fsync fails
            os.close(self._fd)
            self._fd = -1


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalIO(SavepointIO):
    """A local savepoint directory, named by its real path (resolved once, here)."""

    def __init__(self, root: str | os.PathLike[str], *, lock_wait: float = LOCK_WAIT_S) -> None:
        self.root = resolve_local(os.fsdecode(root))
        self.location = self.root
        self.lock_wait = lock_wait
        self._lock_held = False

    def _full(self, rel: str) -> str:
        check_relative_path(rel)
        full = os.path.join(self.root, *rel.split("/"))
        # A symlink inside the savepoint must not lead outside it.
        real_root = os.path.realpath(self.root)
        real = os.path.realpath(full)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise CorruptSavepointError("path leads outside the savepoint directory through a symlink",
                                        path=self.describe(rel))
        return full

    def size(self, rel: str) -> int | None:
        full = self._full(rel)
        try:
            return os.stat(full).st_size
        except FileNotFoundError:
            return None
        except OSError as exc:  # a path through a file, too long, a symlink loop; or the disk fails
            raise typed_os_error(exc, "cannot stat the file", self.describe(rel)) from None

    def modified(self, rel: str) -> float | None:
        full = self._full(rel)
        try:
            return os.stat(full).st_mtime
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise typed_os_error(exc, "cannot stat the file", self.describe(rel)) from None

    def file_identity(self, rel: str) -> object | None:
        try:
            st = os.stat(self._full(rel))
        except OSError:
            return None  # reading it reports what is wrong
        return st.st_dev, st.st_ino

    def _open_regular(self, rel: str) -> int:
        """A descriptor of the regular file ``rel``."""
        try:
            # O_NONBLOCK: opening a FIFO planted in a savepoint must not hang (regular files ignore it).
            fd = os.open(self._full(rel), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise SavepointNotFoundError("file does not exist", path=self.describe(rel)) from None
        except OSError as exc:
            raise typed_os_error(exc, "cannot open the file", self.describe(rel)) from None
        try:
            with typed_os_errors("cannot stat the file", self.describe(rel)):
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise CorruptSavepointError("not a regular file", path=self.describe(rel))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_range(self, rel: str, offset: int, length: int) -> bytes:
        fd = self._open_regular(rel)
        try:
            with typed_os_errors(f"cannot read bytes {offset}..{offset + length}", self.describe(rel)):
                data = _pread_fully(fd, length, offset)
        finally:
            os.close(fd)
        return self._whole(rel, offset, length, data)

    def read_file(self, rel: str) -> bytes:
        # Size and bytes from one open file: a file replaced by a rename meanwhile (a
        # manifest being committed) is read whole, old or new, never a mix.
        fd = self._open_regular(rel)
        try:
            with typed_os_errors("cannot read the file", self.describe(rel)):
                size = os.fstat(fd).st_size
                data = _pread_fully(fd, size, 0)
        finally:
            os.close(fd)
        return self._whole(rel, 0, size, data)

    def create(self, rel: str) -> OutputFile:
        full = self._full(rel)
        with typed_os_errors("cannot create the directory", os.path.dirname(full)):
            os.makedirs(os.path.dirname(full), exist_ok=True)
        return _LocalOutput(full, rel)

    def delete(self, rel: str) -> None:
        full = self._full(rel)
        # ENOENT first: a file someone else deleted meanwhile is what the caller wanted.
        with typed_os_errors("cannot delete the file", full), contextlib.suppress(FileNotFoundError):
            os.unlink(full)

    def list_files(self, rel_dir: str) -> list[str]:
        full = self._full(rel_dir)
        try:
            with os.scandir(full) as entries:
                names = [e.name for e in entries if e.is_file()]
        except FileNotFoundError:
            return []
        except OSError as exc:  # a file, a FIFO or a link loop in place of the directory
            raise typed_os_error(exc, "cannot list the directory", self.describe(rel_dir)) from None
        return sorted(f"{rel_dir}/{n}" for n in names)

    @contextlib.contextmanager
    def commit_lock(self, purpose: str = "a writer's commit", wait: float | None = None) -> Iterator[None]:
        if self._lock_held:  # re-entrant: publish holds it around commit_manifest
            yield
            return
        # flock is released by the kernel when the process dies, so a killed writer
        # never leaves a stale lock behind.
        lock = os.path.join(self.root, LOCK_NAME)
        with typed_os_errors("cannot open the commit lock", lock):
            os.makedirs(self.root, exist_ok=True)
            try:
                # O_NOFOLLOW: a planted link must not make us create or lock a file elsewhere.
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise CorruptSavepointError("the commit lock is a symbolic link; refusing to follow it "
                                                "(remove it)", path=lock) from None
                raise
        try:
            with typed_os_errors("cannot use the commit lock", lock):
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise CorruptSavepointError("the commit lock is not a regular file", path=lock)
                self._acquire(fd, lock, self.lock_wait if wait is None else wait, purpose)
                # Say who holds it, for whoever waits in vain (the text is only ever read under contention).
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{purpose} (pid {os.getpid()} on {socket.gethostname()})".encode(), 0)
            self._lock_held = True
            try:
                yield
            finally:
                self._lock_held = False
        finally:
            os.close(fd)

    @staticmethod
    def _acquire(fd: int, lock: str, wait: float, purpose: str) -> None:
        deadline = time.monotonic() + wait
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "another process"
                    waited = f" (waited {wait:g} s)" if wait else ""
                    raise ConcurrentWriteError(f"the commit lock is held by {holder}{waited}; {purpose} gave up "
                                               "and changed nothing", path=lock) from None
                time.sleep(min(delay, left))
                delay = min(2 * delay, 0.1)

    def commit_manifest(self, data: bytes, expected_previous: bytes | None) -> None:
        with self.commit_lock():
            manifest = os.path.join(self.root, MANIFEST_NAME)
            with typed_os_errors("cannot read the current manifest", manifest):
                try:
                    with open(manifest, "rb") as f:
                        current: bytes | None = f.read()
                except FileNotFoundError:
                    current = None
            if current != expected_previous:
                raise ConcurrentWriteError("the savepoint changed since this writer started; nothing was committed",
                                           path=manifest)
            # New data files' directory entries must be durable before the manifest names them.
            data_dir = os.path.join(self.root, DATA_DIR)
            with typed_os_errors("cannot make the data directory durable (fsync)", data_dir):
                if os.path.isdir(data_dir):
                    _fsync_dir(data_dir)
            tmp = os.path.join(self.root, f"{MANIFEST_NAME}.{uuid.uuid4().hex}.tmp")
            out = _LocalOutput(tmp, tmp)
            try:
                out.write(data)
                out.close()
                with typed_os_errors("cannot rename the new manifest into place", manifest):
                    os.replace(tmp, manifest)
            except BaseException:
                with contextlib.suppress(OSError):
                    out.close()
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            # The rename happened: the commit is visible. A failing directory fsync now can
            # only weaken durability; it must not turn into an abort that deletes data files.
            with contextlib.suppress(OSError):
                _fsync_dir(self.root)

    def sibling(self, name: str) -> SavepointIO:
        check_directory_name(name)
        full = os.path.join(os.path.dirname(self.root), name)
        # A base is a sibling directory: a symlink in its place must not lead elsewhere.
        if os.path.dirname(os.path.realpath(full)) != os.path.dirname(self.root):
            raise CorruptSavepointError(f"base directory {name!r} leads out of the parent directory through a symlink",
                                        path=full)
        return LocalIO(full, lock_wait=self.lock_wait)

    def parent_key(self) -> str:
        return os.path.dirname(self.root)


def _pread_fully(fd: int, length: int, offset: int) -> bytes:
    """``length`` bytes at ``offset``, or fewer at the end of the file: one ``pread``
    returns at most 0x7ffff000 bytes on Linux, so a larger chunk takes several."""
    parts = []
    done = 0
    while done < length:
        part = os.pread(fd, length - done, offset + done)
        if not part:
            break
        parts.append(part)
        done += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class _ArrowOutput(OutputFile):
    def __init__(self, stream, rel: str) -> None:
        self.path = rel
        self._stream = stream

    def write(self, data: bytes) -> None:
        self._stream.write(data)

    def tell(self) -> int:
        return self._stream.tell()

    def close(self) -> None:
        if not self._stream.closed:
            self._stream.close()


class ArrowIO(SavepointIO):
    """Any filesystem pyarrow.fs reaches. The commit writes the manifest in one
    request, which object stores apply atomically; the concurrent-writer check is
    best effort there (no lock primitive)."""

    def __init__(self, uri: str) -> None:
        import pyarrow.fs as pafs

        parsed = parse_location(uri)
        if parsed.is_local:  # a file:// URL: pyarrow's local filesystem, at the resolved path
            self.fs, self.root, self.location = pafs.LocalFileSystem(), parsed.path, f"file://{quote(parsed.path)}"
        else:
            native = parsed.path.replace("s3a://", "s3://", 1).replace("s3n://", "s3://", 1)
            with typed_os_errors("cannot reach the store", parsed.path):
                self.fs, root = pafs.FileSystem.from_uri(native)
            self.root, self.location = root.rstrip("/"), parsed.path

    def _full(self, rel: str) -> str:
        check_relative_path(rel)
        return f"{self.root}/{rel}"

    def _info(self, rel: str):
        with typed_os_errors("cannot stat the file", self.describe(rel)):
            return self.fs.get_file_info(self._full(rel))

    def size(self, rel: str) -> int | None:
        import pyarrow.fs as pafs

        info = self._info(rel)
        return None if info.type == pafs.FileType.NotFound else info.size

    def modified(self, rel: str) -> float | None:
        import pyarrow.fs as pafs

        info = self._info(rel)
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            return None
        return info.mtime.timestamp()

    def read_range(self, rel: str, offset: int, length: int) -> bytes:
        try:
            f = self.fs.open_input_file(self._full(rel))
        except FileNotFoundError:
            raise SavepointNotFoundError("file does not exist", path=self.describe(rel)) from None
        except OSError as exc:
            raise typed_os_error(exc, "cannot open the file", self.describe(rel)) from None
        with f, typed_os_errors(f"cannot read bytes {offset}..{offset + length}", self.describe(rel)):
            return self._whole(rel, offset, length, f.read_at(length, offset))

    def create(self, rel: str) -> OutputFile:
        full = self._full(rel)
        with typed_os_errors("cannot create the file", self.describe(rel)):
            self.fs.create_dir(full.rsplit("/", 1)[0], recursive=True)
            if self.size(rel) is not None:
                raise FileExistsError(self.describe(rel))
            return _ArrowOutput(self.fs.open_output_stream(full), rel)

    def delete(self, rel: str) -> None:
        with typed_os_errors("cannot delete the file", self.describe(rel)), contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self._full(rel))

    def list_files(self, rel_dir: str) -> list[str]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._full(rel_dir), allow_not_found=True)
        with typed_os_errors("cannot list the directory", self.describe(rel_dir)):
            infos = self.fs.get_file_info(selector)
        return sorted(f"{rel_dir}/{i.base_name}" for i in infos if i.type == pafs.FileType.File)

    def commit_manifest(self, data: bytes, expected_previous: bytes | None) -> None:
        current = self.read_file(MANIFEST_NAME) if self.size(MANIFEST_NAME) is not None else None
        if current != expected_previous:
            raise ConcurrentWriteError("the savepoint changed since this writer started; nothing was committed",
                                       path=self.describe(MANIFEST_NAME))
        with typed_os_errors("cannot write the manifest", self.describe(MANIFEST_NAME)):
            self.fs.create_dir(self.root, recursive=True)  # a shallow savepoint may have no data files
            if self.fs.type_name in ("local", "hdfs"):
                # Filesystems with rename: write aside, then rename over the old manifest.
                tmp = f"{MANIFEST_NAME}.{uuid.uuid4().hex}.tmp"
                with self.fs.open_output_stream(self._full(tmp)) as f:
                    f.write(data)
                self.fs.move(self._full(tmp), self._full(MANIFEST_NAME))
            else:
                with self.fs.open_output_stream(self._full(MANIFEST_NAME)) as f:
                    f.write(data)

    def sibling(self, name: str) -> SavepointIO:
        check_directory_name(name)
        return ArrowIO(f"{self.parent_key()}/{quote(name)}")

    def parent_key(self) -> str:
        return self.location.rsplit("/", 1)[0]

    @property
    def name(self) -> str:
        return os.fsdecode(unquote_to_bytes(super().name))  # sibling() quotes it again


def open_io(location: str | os.PathLike[str] | SavepointIO) -> SavepointIO:
    """Local paths and ``file:`` URLs get :class:`LocalIO`; other URLs :class:`ArrowIO`;
    a :class:`SavepointIO` is used as it is (any storage a caller implements). Locations
    are parsed by :func:`pyref.location.parse_location`."""
    if isinstance(location, SavepointIO):
        return location
    parsed = parse_location(location)
    return LocalIO(parsed.path) if parsed.is_local else ArrowIO(parsed.path)
