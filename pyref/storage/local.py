"""Local files: fsync before the commit, the manifest written aside and renamed into
place, an exclusive ``flock`` commit lock (spec/format.md §10.2), and no path that
leads out of the savepoint directory through a symlink (spec/format.md §11)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import time
import uuid
from collections.abc import Iterator

from ..errors import ConcurrentWriteError, CorruptSavepointError, InvalidArgumentError, SavepointNotFoundError
from ..location import resolve_local
from .base import (
    listed_name,
    DATA_DIR,
    LOCK_NAME,
    LOCK_WAIT_S,
    MANIFEST_NAME,
    FileStat,
    OutputFile,
    SavepointIO,
    changed_since_start,
    check_directory_name,
    check_relative_path,
    typed_os_error,
    typed_os_errors,
)


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


def _is_inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def confined_path(root: str, rel: str, where: str) -> str:
    """The local path of ``rel`` (a safe relative path) in the directory ``root``; a symlink on the
    way that leads outside the directory is refused (spec/security.md §4), ``where`` named."""
    full = os.path.join(root, *rel.split("/"))
    if not _is_inside(os.path.realpath(full), os.path.realpath(root)):
        raise CorruptSavepointError("path leads outside the savepoint directory through a symlink", path=where)
    return full


def confined_sibling(root: str, name: str) -> str:
    """The local path of base directory ``name`` beside the directory ``root`` (its real path): a
    base is a sibling directory, so a symlink in its place must not lead elsewhere."""
    check_directory_name(name)
    full = os.path.join(os.path.dirname(root), name)
    if os.path.dirname(os.path.realpath(full)) != os.path.dirname(root):
        raise CorruptSavepointError(f"base directory {name!r} leads out of the parent directory through a symlink",
                                    path=full)
    return full


class LocalIO(SavepointIO):
    """A local savepoint directory, named by its real path (resolved once, here).

    Its store is the filesystem, whose root is ``/``: bases named by a path resolve from
    there (spec/format.md §8.1). ``store_root`` confines the savepoint, its bases and
    their paths to a directory instead (§8.5): a reader of manifests it does not trust,
    or a corpus that carries its own store (compat_tests), gives it."""

    has_commit_lock = True
    #: Local reads are copies out of the page cache (or one disk's queue): reading in the
    #: consuming thread measured faster than handing reads to threads, at half the CPU.
    read_concurrency = 1

    def __init__(self, root: str | os.PathLike[str], *, lock_wait: float = LOCK_WAIT_S,
                 store_root: str | os.PathLike[str] | None = None) -> None:
        self.root = resolve_local(os.fsdecode(root))
        self.location = self.root
        self.lock_wait = lock_wait
        self.store_root = os.sep if store_root is None else resolve_local(os.fsdecode(store_root))
        if not _is_inside(self.root, self.store_root):
            raise InvalidArgumentError(f"the savepoint is not inside its store root {self.store_root}", path=self.root)
        self._lock_held = False

    def _full(self, rel: str) -> str:
        check_relative_path(rel)
        return confined_path(self.root, rel, self.describe(rel))

    def stat(self, rel: str) -> FileStat | None:
        full = self._full(rel)
        try:
            found = os.stat(full)
        except FileNotFoundError:
            return None
        except OSError as exc:  # a path through a file, too long, a symlink loop; or the disk fails
            if exc.errno == errno.ENOTDIR and rel == MANIFEST_NAME and not os.path.isdir(self.root):
                return None  # the location is not a directory: no savepoint there (spec/format.md §2)
            raise typed_os_error(exc, "cannot stat the file", self.describe(rel)) from None
        return FileStat(found.st_size, found.st_mtime)

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
        full = self._full(rel_dir) if rel_dir else self.root
        try:
            with os.scandir(full) as entries:
                names = [e.name for e in entries if e.is_file()]
        except FileNotFoundError:
            return []
        except OSError as exc:  # a file, a FIFO or a link loop in place of the directory
            raise typed_os_error(exc, "cannot list the directory", self.describe(rel_dir)) from None
        return sorted(listed_name(rel_dir, n) for n in names)

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
        with self.commit_lock():  # the lock every writer of a pyref savepoint takes (spec/format.md §10.2)
            self._commit_locked(MANIFEST_NAME, data, expected_previous)

    def commit_file(self, rel: str, data: bytes, expected_previous: bytes | None) -> None:
        # Not a pyref manifest (a Flink export's _metadata): no lock file is left beside it; an
        # exclusive flock of the directory itself keeps pyref processes apart just as well.
        directory = os.path.dirname(self._full(rel))
        with typed_os_errors("cannot lock the directory", directory):
            os.makedirs(directory, exist_ok=True)
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with typed_os_errors("cannot lock the directory", directory):
                fcntl.flock(fd, fcntl.LOCK_EX)  # held for a read and a rename: never long
            self._commit_locked(rel, data, expected_previous)
        finally:
            os.close(fd)  # releases the flock

    def _commit_locked(self, rel: str, data: bytes, expected_previous: bytes | None) -> None:
        target = self._full(rel)
        # A regular file only: a FIFO or device planted in its place must not hang or flood the commit.
        if self.read_if_present(rel) != expected_previous:
            raise changed_since_start(rel, target)
        # The directory entries of the files the new one names must be durable before it is.
        for directory in {os.path.join(self.root, DATA_DIR), os.path.dirname(target)}:
            with typed_os_errors("cannot make the directory durable (fsync)", directory):
                if os.path.isdir(directory):
                    _fsync_dir(directory)
        self.replace_file(rel, data)

    def replace_file(self, rel: str, data: bytes) -> None:
        target = self._full(rel)
        tmp = f"{target}.{uuid.uuid4().hex}.tmp"  # beside it: the rename stays in one directory
        with typed_os_errors("cannot create the directory", os.path.dirname(target)):
            os.makedirs(os.path.dirname(target), exist_ok=True)
        out = _LocalOutput(tmp, tmp)
        try:
            out.write(data)
            out.close()
            with typed_os_errors("cannot rename the new file into place", target):
                os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                out.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        # The rename happened: the new file is visible. A failing directory fsync now can only
        # weaken durability; it must not turn into an abort that deletes what the file names.
        with contextlib.suppress(OSError):
            _fsync_dir(os.path.dirname(target))

    def sibling(self, name: str) -> SavepointIO:
        return self._in_store(confined_sibling(self.root, name), f"base directory {name!r}")

    def parent_key(self) -> str:
        return os.path.dirname(self.root)

    def store_key(self) -> str:
        # Every local directory is in one store, the filesystem, unless confined to a store root.
        return f"file://{self.store_root}"

    def store_path(self) -> str:
        return os.path.relpath(self.root, self.store_root).replace(os.sep, "/")

    def at_store_path(self, path: str) -> SavepointIO:
        check_relative_path(path, what="base path")
        return self._in_store(os.path.join(self.store_root, *path.split("/")), f"base path {path!r}")

    def _in_store(self, full: str, what: str) -> LocalIO:
        """The savepoint directory ``full``, which must resolve inside the store root (links resolved)."""
        if not _is_inside(os.path.realpath(full), self.store_root):
            raise CorruptSavepointError(f"{what} leads outside the store root {self.store_root}", path=full)
        return LocalIO(full, lock_wait=self.lock_wait, store_root=self.store_root)


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
