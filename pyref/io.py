"""Storage behind a small interface: where a savepoint's files live.

:class:`LocalIO` serves local paths with the guarantees the spec asks of a writer
(fsync before commit, atomic rename of the manifest, an exclusive commit lock).
:class:`ArrowIO` serves any URI pyarrow.fs understands (``hdfs://``, ``s3://``,
``s3a://``, ``gs://``) for reading and for writers whose store makes a single-object
write atomic (spec/format.md §10).

Every relative path passes :func:`check_relative_path` and, locally, is resolved
without following a symlink out of the savepoint directory (spec/format.md §11).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from urllib.parse import urlparse

from .errors import ConcurrentWriteError, CorruptSavepointError, InvalidArgumentError, SavepointNotFoundError

MANIFEST_NAME = "_manifest"
LOCK_NAME = ".lock"


def check_relative_path(path: str, *, what: str = "path") -> str:
    """Refuse any path that could leave the directory it is relative to."""
    segments = path.split("/")
    if (not path or path.startswith("/") or "\\" in path or "\x00" in path or ":" in path
            or any(s in ("", ".", "..") for s in segments)):
        raise CorruptSavepointError(f"{what} {path!r} is not a safe relative path (spec/format.md §6)")
    return path


def check_directory_name(name: str) -> str:
    """A base savepoint is named by one path segment: a sibling directory."""
    if not name or "/" in name or "\\" in name or "\x00" in name or name in (".", "..") or ":" in name:
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

    def commit_lock(self) -> contextlib.AbstractContextManager[None]:
        """Held while the manifest changes, so that no commit interleaves (spec/format.md §10.2).
        Raises :class:`ConcurrentWriteError` if someone else holds it. Without a lock
        primitive (object stores) it holds nothing."""
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
        self._fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._pos = 0

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
            self._pos += n

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalIO(SavepointIO):
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.location = self.root

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
        try:
            return os.stat(self._full(rel)).st_size
        except FileNotFoundError:
            return None
        except OSError as exc:  # a path through a file, too long, a symlink loop
            raise CorruptSavepointError(f"cannot resolve the path: {exc.strerror}", path=self.describe(rel)) from None

    def modified(self, rel: str) -> float | None:
        try:
            return os.stat(self._full(rel)).st_mtime
        except FileNotFoundError:
            return None

    def file_identity(self, rel: str) -> object | None:
        try:
            st = os.stat(self._full(rel))
        except OSError:
            return None  # reading it reports what is wrong
        return st.st_dev, st.st_ino

    def read_range(self, rel: str, offset: int, length: int) -> bytes:
        full = self._full(rel)
        try:
            # O_NONBLOCK: opening a FIFO planted in a savepoint must not hang (regular files ignore it).
            fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise SavepointNotFoundError("file does not exist", path=self.describe(rel)) from None
        except OSError as exc:
            raise CorruptSavepointError(f"cannot open the file: {exc.strerror}", path=self.describe(rel)) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CorruptSavepointError("not a regular file", path=self.describe(rel))
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        return self._whole(rel, offset, length, data)

    def create(self, rel: str) -> OutputFile:
        full = self._full(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        return _LocalOutput(full, rel)

    def delete(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._full(rel))

    def list_files(self, rel_dir: str) -> list[str]:
        try:
            with os.scandir(self._full(rel_dir)) as entries:
                names = [e.name for e in entries if e.is_file()]
        except FileNotFoundError:
            return []
        return sorted(f"{rel_dir}/{n}" for n in names)

    @contextlib.contextmanager
    def commit_lock(self) -> Iterator[None]:
        # flock is released by the kernel when the process dies, so a killed writer
        # never leaves a stale lock behind.
        os.makedirs(self.root, exist_ok=True)
        fd = os.open(os.path.join(self.root, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConcurrentWriteError("another writer is committing to this savepoint",
                                           path=self.location) from None
            yield
        finally:
            os.close(fd)

    def commit_manifest(self, data: bytes, expected_previous: bytes | None) -> None:
        with self.commit_lock():
            manifest = os.path.join(self.root, MANIFEST_NAME)
            try:
                with open(manifest, "rb") as f:
                    current: bytes | None = f.read()
            except FileNotFoundError:
                current = None
            if current != expected_previous:
                raise ConcurrentWriteError("the savepoint changed since this writer started; nothing was committed",
                                           path=manifest)
            # New data files' directory entries must be durable before the manifest names them.
            data_dir = os.path.join(self.root, "data")
            if os.path.isdir(data_dir):
                _fsync_dir(data_dir)
            tmp = os.path.join(self.root, f"{MANIFEST_NAME}.{uuid.uuid4().hex}.tmp")
            out = _LocalOutput(tmp, tmp)
            try:
                out.write(data)
                out.close()
                os.replace(tmp, manifest)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
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
        if os.path.dirname(os.path.realpath(full)) != os.path.realpath(os.path.dirname(self.root)):
            raise CorruptSavepointError(f"base directory {name!r} leads out of the parent directory through a symlink",
                                        path=full)
        return LocalIO(full)

    def parent_key(self) -> str:
        return os.path.realpath(os.path.dirname(self.root))


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

        parsed = urlparse(uri)
        native = uri.replace("s3a://", "s3://", 1).replace("s3n://", "s3://", 1)
        self.fs, self.root = pafs.FileSystem.from_uri(native)
        self.root = self.root.rstrip("/")
        self.location = uri.rstrip("/")
        self._scheme = parsed.scheme

    def _full(self, rel: str) -> str:
        check_relative_path(rel)
        return f"{self.root}/{rel}"

    def size(self, rel: str) -> int | None:
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(self._full(rel))
        return None if info.type == pafs.FileType.NotFound else info.size

    def modified(self, rel: str) -> float | None:
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(self._full(rel))
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            return None
        return info.mtime.timestamp()

    def read_range(self, rel: str, offset: int, length: int) -> bytes:
        try:
            f = self.fs.open_input_file(self._full(rel))
        except FileNotFoundError:
            raise SavepointNotFoundError("file does not exist", path=self.describe(rel)) from None
        with f:
            return self._whole(rel, offset, length, f.read_at(length, offset))

    def create(self, rel: str) -> OutputFile:
        full = self._full(rel)
        self.fs.create_dir(full.rsplit("/", 1)[0], recursive=True)
        if self.size(rel) is not None:
            raise FileExistsError(self.describe(rel))
        return _ArrowOutput(self.fs.open_output_stream(full), rel)

    def delete(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self._full(rel))

    def list_files(self, rel_dir: str) -> list[str]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._full(rel_dir), allow_not_found=True)
        return sorted(f"{rel_dir}/{i.base_name}" for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File)

    def commit_manifest(self, data: bytes, expected_previous: bytes | None) -> None:
        current = self.read_file(MANIFEST_NAME) if self.size(MANIFEST_NAME) is not None else None
        if current != expected_previous:
            raise ConcurrentWriteError("the savepoint changed since this writer started; nothing was committed",
                                       path=self.describe(MANIFEST_NAME))
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
        parent = self.location.rsplit("/", 1)[0]
        return ArrowIO(f"{parent}/{name}")

    def parent_key(self) -> str:
        return self.location.rsplit("/", 1)[0]


def open_io(location: str | os.PathLike[str] | SavepointIO) -> SavepointIO:
    """Local paths and ``file://`` URIs get :class:`LocalIO`; other URIs :class:`ArrowIO`;
    a :class:`SavepointIO` is used as it is (any storage a caller implements)."""
    if isinstance(location, SavepointIO):
        return location
    location = os.fspath(location)
    if not location:
        raise InvalidArgumentError("empty savepoint location")
    scheme = urlparse(location).scheme
    if scheme == "file":
        return LocalIO(urlparse(location).path)
    if len(scheme) > 1:  # a one-letter scheme is a Windows drive
        return ArrowIO(location)
    return LocalIO(location)

