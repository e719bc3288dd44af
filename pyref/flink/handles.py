"""Flink state handles as ``MetadataV2V3SerializerBase`` writes them, and
where their bytes are.

A stream handle says where a run of bytes is: inline in ``_metadata``
(``ByteStreamStateHandle``), a file (``FileStateHandle``, absolute), a file
relative to the savepoint directory (``RelativeFileStateHandle``), or a range
of a merged file (file-merging checkpoints). A keyed handle adds the key-group
range and the offset of each key group in its stream; an operator handle the
offsets of each state's elements and their distribution mode.

An incremental handle (RocksDB native format: every RocksDB checkpoint since Flink 1.16,
full or incremental, and native-format savepoints) names the stream of the backend's
serialization proxy and RocksDB's files (:mod:`pyref.flink.rocksdb`). A changelog handle
names the inner backend's materialized handles and the changes since, in ``_metadata`` or in
DSTL files (:mod:`pyref.flink.changelog`).

A checkpoint taken with file merging (FLIP-306, Flink 1.20+) writes every stream as a segment of a
file merged with others (``SegmentFileStateHandle``: start, size, scope, file, logical file id), in a
directory per subtask below the checkpoint's ``shared/`` or per task manager below its ``taskowned/``;
its operator handles (``FileMergingOperatorStreamStateHandle``) add those two directories and whether the
handle is empty (``EmptyFileMergingOperatorStreamStateHandle``, of the empty segment).
"""

from __future__ import annotations

import enum
import mmap
import os
import posixpath
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from ..errors import (CorruptSavepointError, InvalidArgumentError, SavepointNotFoundError, StorageError,
                      UnsupportedFormatError)
from ..location import parse_location
from ..storage import SavepointIO, is_safe_relative_path, open_io, typed_os_errors
from .datainput import DataInput

__all__ = [
    "StreamHandle",
    "KeyGroupsHandle",
    "OperatorStateHandle",
    "OperatorStateInfo",
    "DistributionMode",
    "ChangelogHandle",
    "ChangeSetFiles",
    "InMemoryChanges",
    "KeyedHandle",
    "stored_bytes",
    "IncrementalHandle",
    "read_stream_handle",
    "read_keyed_handle",
    "read_operator_handle",
    "HandleStore",
    "LocalHandleStore",
    "RemoteHandleStore",
    "open_handle_store",
]

# Handle type bytes (MetadataV2V3SerializerBase).
NULL_HANDLE = 0
BYTE_STREAM = 1
FILE_STREAM = 2
KEY_GROUPS = 3
PARTITIONABLE_OPERATOR = 4
INCREMENTAL = 5
RELATIVE_STREAM = 6
SAVEPOINT_KEY_GROUPS = 7
CHANGELOG = 8
CHANGELOG_BYTE_INCREMENT = 9
CHANGELOG_FILE_INCREMENT = 10
INCREMENTAL_V2 = 11
KEY_GROUPS_V2 = 12
CHANGELOG_FILE_INCREMENT_V2 = 13
CHANGELOG_V2 = 14
SEGMENT_FILE = 15
EMPTY_SEGMENT_FILE = 16
SEGMENT_PARTITIONABLE_OPERATOR = 17
#: CheckpointedStateScope ordinals of a segment: SHARED (in ``shared/``), EXCLUSIVE (in ``taskowned/``).
SEGMENT_SCOPES = (0, 1)

TAKE_CANONICAL = ("take a canonical savepoint (flink stop --savepointPath ... or "
                  "savepoint --type canonical, the default) and read that instead")
#: The directories of a checkpoint's shared and task-owned state (CheckpointStorageLocation), beside chk-N.
CHECKPOINT_SIBLINGS = ("shared", "taskowned")
#: The directory a ForSt database keeps its files in, below its operator's directory.
FORST_DB = "db"


def checkpoint_sibling(path: str, *, merged: bool = False) -> tuple[str, str] | None:
    """(``shared`` or ``taskowned``, the file's path below it) when the posix ``path`` of a state file
    lies in such a directory (RocksDB's files: ``shared/<file>``), in a ForSt database's directory
    below it (``shared/<operator's directory>/db/<file>``: Flink 2.x's ForSt, its primary directory the
    checkpoint directory, the default, where the async state API's database keeps its files and its
    checkpoints name them without copying) or, the file of a segment (``merged``), in a directory just
    below it (file merging's ``shared/<subtask's directory>/<file>``, ``taskowned/<task manager's>/<file>``);
    else None. Nothing else below those directories, so that a checkpoint's own file under a directory
    that happens to be named so is never sought there."""
    parts = path.split("/")
    if len(parts) >= 2 and parts[-2] in CHECKPOINT_SIBLINGS:
        return parts[-2], parts[-1]
    if len(parts) >= 4 and parts[-2] == FORST_DB and parts[-4] in CHECKPOINT_SIBLINGS:
        below = "/".join(parts[-3:])
        return (parts[-4], below) if is_safe_relative_path(below) else None
    if merged and len(parts) >= 3 and parts[-3] in CHECKPOINT_SIBLINGS:
        below = "/".join(parts[-2:])
        return (parts[-3], below) if is_safe_relative_path(below) else None
    return None


class DistributionMode(enum.IntEnum):
    """``OperatorStateHandle.Mode`` ordinals."""

    SPLIT_DISTRIBUTE = 0
    UNION = 1
    BROADCAST = 2


@dataclass(frozen=True)
class StreamHandle:
    """Bytes of state: ``kind`` is ``inline``, ``file``, ``relative-file`` or
    ``segment`` (``start`` .. ``start + size`` of a merged file)."""

    kind: str
    location: str  # handle name (inline), path or URI (file), relative path
    size: int
    data: bytes | None = field(default=None, repr=False)
    start: int = 0


@dataclass(frozen=True)
class KeyGroupsHandle:
    """Keyed state of a full snapshot: key groups ``first .. first + len(offsets) - 1``
    and each one's offset in the stream (0 = that key group holds nothing). A savepoint's
    is in the savepoint format; a checkpoint's (``KeyGroupsStateHandle``) in the savepoint
    format or, written by the heap backend, in its own layout (:mod:`pyref.flink.heap`)."""

    first_key_group: int
    offsets: tuple[int, ...]
    stream: StreamHandle | None
    savepoint: bool  # KeyGroupsSavepointStateHandle (written by a savepoint)

    @property
    def key_groups(self) -> range:
        return range(self.first_key_group, self.first_key_group + len(self.offsets))


@dataclass(frozen=True)
class IncrementalHandle:
    """RocksDB native-format keyed state (``IncrementalRemoteKeyedStateHandle``): the stream of
    the backend's serialization proxy (state meta infos) and RocksDB's files, each as (its name in
    RocksDB's directory, e.g. ``000042.sst``, and where its bytes are), shared ones (an
    incremental checkpoint's ``../shared``, possibly of earlier checkpoints) and private ones."""

    first_key_group: int
    key_group_count: int
    meta: StreamHandle | None
    shared: tuple[tuple[str, StreamHandle | None], ...]
    private: tuple[tuple[str, StreamHandle | None], ...]

    @property
    def key_groups(self) -> range:
        return range(self.first_key_group, self.first_key_group + self.key_group_count)


@dataclass(frozen=True)
class InMemoryChanges:
    """Changes the changelog backend kept in ``_metadata`` (``InMemoryChangelogStateHandle``, the
    ``memory`` changelog storage): per change its key group, bytes and where those are in ``_metadata``."""

    key_groups: range
    changes: tuple[tuple[int, bytes, int], ...]


@dataclass(frozen=True)
class ChangeSetFiles:
    """Change sets in DSTL files (``ChangelogStateHandleStreamImpl``, the ``filesystem`` changelog
    storage): each a file and the offset of the change set in its (decompressed) stream."""

    key_groups: range
    change_sets: tuple[tuple[StreamHandle | None, int], ...]


@dataclass(frozen=True)
class ChangelogHandle:
    """Keyed state of the changelog state backend (``ChangelogStateBackendHandle``): the inner
    backend's last materialized snapshot (none before the first materialization) and the changes
    made since, in the order Flink applies them (:mod:`pyref.flink.changelog`)."""

    first_key_group: int
    key_group_count: int
    materialized: tuple[KeyGroupsHandle | IncrementalHandle, ...]
    changes: tuple[InMemoryChanges | ChangeSetFiles, ...]
    materialization_id: int

    @property
    def key_groups(self) -> range:
        return range(self.first_key_group, self.first_key_group + self.key_group_count)



@dataclass(frozen=True)
class OperatorStateInfo:
    """One operator state in a handle: its mode and element offsets (one
    offset for a broadcast state: where its map starts)."""

    mode: DistributionMode
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class OperatorStateHandle:
    states: dict[str, OperatorStateInfo]
    stream: StreamHandle | None


#: A keyed handle of a subtask's state in ``_metadata``.
KeyedHandle = KeyGroupsHandle | IncrementalHandle | ChangelogHandle


def stored_bytes(handle: KeyedHandle | OperatorStateHandle | None) -> int:
    """The bytes a handle's state is stored in: its stream; RocksDB's files and meta stream; a
    changelog's materialized snapshot and changes (each DSTL file it names once, whole: a change
    set's size is not recorded)."""
    if isinstance(handle, ChangelogHandle):
        changes = sum(len(data) for part in handle.changes if isinstance(part, InMemoryChanges)
                      for _, data, _ in part.changes)
        files = {s.location: s.size for part in handle.changes if isinstance(part, ChangeSetFiles)
                 for s, _ in part.change_sets if s is not None}
        return sum(map(stored_bytes, handle.materialized)) + changes + sum(files.values())
    if isinstance(handle, IncrementalHandle):
        streams = [handle.meta] + [s for _, s in handle.shared + handle.private]
        return sum(s.size for s in streams if s is not None)
    return handle.stream.size if handle is not None and handle.stream is not None else 0


def read_stream_handle(inp: DataInput) -> StreamHandle | None:
    start = inp.pos
    kind = inp.read_ubyte("stream handle type")
    if kind == NULL_HANDLE:
        return None
    if kind == BYTE_STREAM:
        name = inp.read_utf("inline handle name")
        size = inp.read_count("inline state length")
        return StreamHandle("inline", name, size, inp.read_bytes(size, "inline state"))
    if kind == FILE_STREAM:
        size = inp.read_long("file state size")
        return StreamHandle("file", inp.read_utf("file state path"), size)
    if kind == RELATIVE_STREAM:
        path = inp.read_utf("relative state path")
        return StreamHandle("relative-file", path, inp.read_long("relative state size"))
    if kind == SEGMENT_FILE:
        at = inp.pos
        begin = inp.read_long("segment start")
        if begin < 0:  # a position in its merged file: negative would index from the file's end
            raise inp.corrupt(f"negative segment start {begin}", at, 8)
        at = inp.pos
        size = inp.read_long("segment size")
        if size < 0:
            raise inp.corrupt(f"negative segment size {size}", at, 8)
        at = inp.pos
        scope = inp.read_int("segment scope")
        if scope not in SEGMENT_SCOPES:
            raise inp.corrupt(f"unknown segment scope {scope} (CheckpointedStateScope: 0 shared, 1 exclusive)", at, 4)
        path = inp.read_utf("segment file path")
        inp.read_utf("segment logical file id")
        return StreamHandle("segment", path, size, start=begin)
    if kind == EMPTY_SEGMENT_FILE:
        return StreamHandle("inline", "empty segment", 0, b"")
    if kind == KEY_GROUPS:  # a key-group handle nested as a stream handle (legacy)
        raise inp.corrupt("a key-group handle where a stream handle was expected", start, 1)
    raise inp.corrupt(f"unknown stream handle type {kind}", start, 1)


def _read_key_group_range(inp: DataInput) -> tuple[int, int]:
    start = inp.pos
    first = inp.read_int("first key group")
    count = inp.read_int("key group count")
    if first < 0 or count < 0 or first + count > 32768:
        raise inp.corrupt(f"key group range {first} + {count} is not within 0..32767", start, 8)
    return first, count


def _read_handle_list(inp: DataInput) -> tuple[tuple[str, StreamHandle | None], ...]:
    """A list of (local path, stream handle) of an incremental handle."""
    return tuple((inp.read_utf("incremental local path"), read_stream_handle(inp))
                 for _ in range(inp.read_count("incremental file count", 3)))


#: The type bytes of a changelog handle's materialized handles and of its non-materialized ones.
_MATERIALIZED = frozenset({KEY_GROUPS, SAVEPOINT_KEY_GROUPS, KEY_GROUPS_V2, INCREMENTAL, INCREMENTAL_V2})
_NON_MATERIALIZED = frozenset({CHANGELOG_BYTE_INCREMENT, CHANGELOG_FILE_INCREMENT, CHANGELOG_FILE_INCREMENT_V2})


def _nested(inp: DataInput, kinds: frozenset[int], what: str) -> KeyedHandle | InMemoryChanges | ChangeSetFiles:
    """A handle inside a changelog handle, which must be of one of the type bytes ``kinds``: checked
    before it is read, so that changelog handles nested in one another never recurse."""
    start = inp.need(1, "keyed handle type")
    kind = inp.data[start]
    if kind not in kinds:
        raise inp.corrupt(f"a handle of type {kind} among a changelog handle's {what} state", start, 1)
    handle = _read_keyed(inp)
    assert handle is not None  # a type byte of kinds is never the null handle's
    return handle


def read_keyed_handle(inp: DataInput) -> KeyedHandle | None:
    start = inp.pos
    handle = _read_keyed(inp)
    if isinstance(handle, (InMemoryChanges, ChangeSetFiles)):
        raise inp.corrupt("changelog changes outside a changelog state backend handle", start, inp.pos - start)
    return handle


def _read_keyed(inp: DataInput) -> KeyedHandle | InMemoryChanges | ChangeSetFiles | None:
    start = inp.pos
    kind = inp.read_ubyte("keyed handle type")
    if kind == NULL_HANDLE:
        return None
    if kind in (KEY_GROUPS, KEY_GROUPS_V2, SAVEPOINT_KEY_GROUPS):
        first, count = _read_key_group_range(inp)
        inp.need(8 * count, "key group offsets")
        offsets = tuple(inp.read_long("key group offset") for _ in range(count))
        stream = read_stream_handle(inp)
        if kind == KEY_GROUPS_V2:
            inp.read_utf("state handle id")
        if any(o < 0 for o in offsets):
            raise inp.corrupt("negative key group offset", start, inp.pos - start)
        return KeyGroupsHandle(first, offsets, stream, savepoint=kind == SAVEPOINT_KEY_GROUPS)
    if kind in (INCREMENTAL, INCREMENTAL_V2):
        inp.read_long("checkpoint id")
        inp.read_utf("backend id")
        first, count = _read_key_group_range(inp)
        if kind == INCREMENTAL_V2:
            inp.read_long("checkpointed size")
        meta = read_stream_handle(inp)
        shared = _read_handle_list(inp)
        private = _read_handle_list(inp)
        if kind == INCREMENTAL_V2:
            inp.read_utf("state handle id")
        return IncrementalHandle(first, count, meta, shared, private)
    if kind in (CHANGELOG, CHANGELOG_V2):
        first, count = _read_key_group_range(inp)
        inp.read_long("checkpointed size")
        materialized = tuple(_nested(inp, _MATERIALIZED, "materialized")
                             for _ in range(inp.read_count("materialized handle count")))
        changes = tuple(_nested(inp, _NON_MATERIALIZED, "non-materialized")
                        for _ in range(inp.read_count("changelog handle count")))
        materialization = inp.read_long("materialization id")
        if kind == CHANGELOG_V2:
            inp.read_long("checkpoint id")
        inp.read_utf("state handle id")
        return ChangelogHandle(first, count, materialized, changes, materialization)  # type: ignore[arg-type]
    if kind == CHANGELOG_BYTE_INCREMENT:
        first, count = _read_key_group_range(inp)
        inp.read_long("sequence from")
        inp.read_long("sequence to")
        in_memory = []
        for _ in range(inp.read_count("change count", 8)):
            key_group = inp.read_int("change key group")
            at = inp.pos
            size = inp.read_count("change length")
            in_memory.append((key_group, inp.read_bytes(size, "change"), inp.base + at + 4))
        inp.read_utf("state handle id")
        return InMemoryChanges(range(first, first + count), tuple(in_memory))
    if kind in (CHANGELOG_FILE_INCREMENT, CHANGELOG_FILE_INCREMENT_V2):
        first, count = _read_key_group_range(inp)
        change_sets = []
        for _ in range(inp.read_count("changelog file count", 9)):
            at = inp.pos
            offset = inp.read_long("changelog offset")
            if offset < 0:
                raise inp.corrupt(f"negative change set offset {offset}", at, 8)
            change_sets.append((read_stream_handle(inp), offset))
        inp.read_long("state size")
        inp.read_long("checkpointed size")
        inp.read_utf("state handle id")
        if kind == CHANGELOG_FILE_INCREMENT_V2:
            inp.read_utf("storage identifier")
        return ChangeSetFiles(range(first, first + count), tuple(change_sets))
    raise inp.corrupt(f"unknown keyed state handle type {kind}", start, 1)


def read_operator_handle(inp: DataInput) -> OperatorStateHandle | None:
    start = inp.pos
    kind = inp.read_ubyte("operator handle type")
    if kind == NULL_HANDLE:
        return None
    if kind not in (PARTITIONABLE_OPERATOR, SEGMENT_PARTITIONABLE_OPERATOR):
        raise inp.corrupt(f"unknown operator state handle type {kind}", start, 1)
    states: dict[str, OperatorStateInfo] = {}
    for _ in range(inp.read_count("operator state count", 7)):
        name = inp.read_utf("operator state name")
        mode_at = inp.pos
        mode = inp.read_ubyte("distribution mode")
        if mode > 2:
            raise inp.corrupt(f"operator state {name!r}: unknown distribution mode {mode}", mode_at, 1)
        count = inp.read_count("element offset count", 8)
        offsets = tuple(inp.read_long("element offset") for _ in range(count))
        if name in states:
            raise inp.corrupt(f"operator state {name!r} appears twice in one handle", start)
        states[name] = OperatorStateInfo(DistributionMode(mode), offsets)
    if kind == SEGMENT_PARTITIONABLE_OPERATOR:
        # The subtask's task-owned and shared directories: where its segments' files are, named by each
        # segment's own path too; what is read is the segment's.
        inp.read_utf("file-merging task-owned directory")
        inp.read_utf("file-merging shared directory")
        empty = inp.read_bool("file-merging handle empty")
        at = inp.pos
        expected = EMPTY_SEGMENT_FILE if empty else SEGMENT_FILE
        found = inp.data[inp.need(1, "operator state stream handle type")]
        if found != expected:
            raise inp.corrupt(f"a file-merging operator handle{' (empty)' if empty else ''} of a stream handle of type "
                              f"{found}, not a segment (type {expected})", at, 1)
        if empty:  # a subtask without operator state keeps its directories in such a handle: no stream to read
            if states:
                raise inp.corrupt(f"an empty file-merging operator handle names states {sorted(states)}", start,
                                  inp.pos - start)
            read_stream_handle(inp)
            return None
    return OperatorStateHandle(states, read_stream_handle(inp))


#: Local state files larger than this are memory-mapped, smaller ones read.
_MAPPED_FROM_BYTES = 1 << 20


class HandleStore(ABC):
    """Opens the bytes of the stream handles of one savepoint directory: a local one
    (:class:`LocalHandleStore`) or one on remote storage (:class:`RemoteHandleStore`);
    :func:`open_handle_store` picks by location. The state files read are kept, the most
    recently used first, up to :attr:`cache_bytes`."""

    #: A remote state file is read whole, a local one mapped (or read, if small); those of one
    #: operator's subtasks are read in turn, each for every state it holds, so a few are kept, not
    #: the whole savepoint (whose files, thousands in a large RocksDB checkpoint, would otherwise
    #: each hold memory or a mapping's file descriptor until the savepoint is closed).
    cache_bytes = 512 << 20

    def __init__(self) -> None:
        self._files: dict[str, bytes | mmap.mmap] = {}  # least recently used first
        self._cached = 0  # their bytes

    def open(self, handle: StreamHandle) -> tuple[bytes | mmap.mmap, int, int, str]:
        """``(buffer, start, end, name)``: the handle's bytes are ``buffer[start:end]``."""
        if handle.kind == "inline":
            return handle.data or b"", 0, len(handle.data or b""), f"_metadata ({handle.location})"
        buffer, name = self.open_file(handle)
        start = handle.start
        end = start + handle.size
        if handle.size < 0 or end > len(buffer):
            raise CorruptSavepointError(f"state handle says {handle.size} bytes at {start} but the file has "
                                        f"{len(buffer)}", path=name, byte_range=(start, end))
        return buffer, start, end, name

    def open_file(self, handle: StreamHandle) -> tuple[bytes | mmap.mmap, str]:
        """The whole file a handle names, whatever size the handle gives (a DSTL file's handle gives
        its stream's, the file holds a compression flag byte more), and the file's name."""
        if handle.kind == "inline":
            return handle.data or b"", f"_metadata ({handle.location})"
        name = self._resolve(handle)
        buffer = self._files.pop(name, None)
        if buffer is None:
            buffer = self._read(name)
            self._cached += len(buffer)
        self._files[name] = buffer
        while len(self._files) > 1 and self._cached > self.cache_bytes:
            self._cached -= len(self._files.pop(next(iter(self._files))))
        return buffer, name

    @abstractmethod
    def _resolve(self, handle: StreamHandle) -> str:
        """The state file of a file handle, as :meth:`_read` takes it."""

    @abstractmethod
    def _read(self, name: str) -> bytes | mmap.mmap:
        """The whole state file ``name``."""

    def close(self) -> None:
        self._files.clear()
        self._cached = 0


class LocalHandleStore(HandleStore):
    """The state files of a local savepoint directory, memory-mapped.

    Relative handles resolve against the savepoint directory and may not
    leave it. An absolute file handle is used when it lies inside the
    directory; when it does not exist (the savepoint was moved), the file of
    the same name in the directory is used; files elsewhere are refused
    unless ``allow_external_files``.
    """

    def __init__(self, directory: str, *, allow_external_files: bool = False) -> None:
        super().__init__()
        self.directory = os.path.realpath(directory)
        self.allow_external_files = allow_external_files

    def local_path(self, handle: StreamHandle) -> str:
        self._no_nul(handle.location, handle.location)
        if handle.kind == "relative-file":
            path = os.path.realpath(os.path.join(self.directory, handle.location))
            if not self._inside(path):
                raise CorruptSavepointError(f"relative state path {handle.location!r} leaves the savepoint "
                                            "directory", path=self.directory)
            if not os.path.isfile(path):
                raise CorruptSavepointError(f"state file {handle.location!r} does not exist", path=self.directory)
            return path
        parsed = urlparse(handle.location)
        if parsed.scheme not in ("", "file"):
            fallback = self._moved(handle.location, os.path.basename(parsed.path))
            if fallback is not None:
                return fallback
            raise UnsupportedFormatError(f"state file {handle.location!r} is on {parsed.scheme!r} storage; "
                                         "open the savepoint at its URL, or copy the savepoint directory here",
                                         path=self.directory)
        path = os.path.realpath(self._no_nul(unquote(parsed.path), handle.location))
        if self._inside(path) and os.path.isfile(path):
            return path
        moved = self._moved(handle.location, os.path.basename(path))
        if moved is not None:
            return moved
        # A checkpoint keeps shared and task-owned state beside its chk-N directory.
        beside, below = (checkpoint_sibling(path, merged=handle.kind == "segment")
                         or (os.path.basename(os.path.dirname(path)), ""))
        sibling = self._sibling(handle.location, beside, below)
        if sibling is not None:
            return sibling
        if self.allow_external_files and os.path.isfile(path):
            return path
        what = f" (a checkpoint's {beside} state, beside its chk-N directory)" if beside in CHECKPOINT_SIBLINGS else ""
        if os.path.isfile(path):
            raise UnsupportedFormatError(f"state file {path}{what} lies outside the savepoint directory; pass "
                                         "allow_external_files=True (--allow-external-files) to read it", path=self.directory)
        # Where it was looked for: a chk-N copied without the job's shared/ directory is the usual cause.
        looked = (f"; looked for in {os.path.join(os.path.dirname(self.directory), beside)}: copy the job's {beside}/ "
                  "directory beside the chk-N directory along with it" if what
                  else f", nor does {os.path.basename(path)} in {self.directory}")
        raise CorruptSavepointError(f"state file {handle.location!r}{what} does not exist{looked}", path=self.directory)

    def _no_nul(self, path: str, location: str) -> str:
        # No file name holds NUL (os functions raise ValueError on it), nor does a %00 decode to one.
        if "\0" in path:
            raise CorruptSavepointError(f"state file path {location!r} contains a NUL character",
                                        path=self.directory)
        return path

    def _moved(self, location: str, name: str) -> str | None:
        """The file ``name`` in the savepoint directory, where a savepoint that was moved
        keeps the file an absolute handle names."""
        return self._file_in(self.directory, "the savepoint directory", location, name)

    def _sibling(self, location: str, beside: str, name: str) -> str | None:
        """The file ``name`` (a relative path) of a checkpoint's ``shared`` or ``taskowned`` directory
        beside the checkpoint directory (where an incremental checkpoint's earlier SST files are),
        moved along with it or not."""
        if beside not in CHECKPOINT_SIBLINGS:
            return None
        parent = os.path.dirname(self.directory)
        directory = os.path.realpath(os.path.join(parent, beside))
        # As a pyref base must: the directory itself a link leading out of the parent would open any directory.
        if os.path.dirname(directory) != parent and not self.allow_external_files:
            raise UnsupportedFormatError(f"state file {location!r}: the checkpoint's {beside} directory is a link to "
                                         f"{directory}, outside {parent}; pass allow_external_files=True to read it",
                                         path=self.directory)
        return self._file_in(directory, directory, location, name)

    def _file_in(self, directory: str, where: str, location: str, name: str) -> str | None:
        """The file ``name`` in ``directory`` (a real path; ``where`` names it in errors), or
        None; a link there must not lead out of that directory."""
        if not name:
            return None
        path = os.path.realpath(os.path.join(directory, name))
        if not os.path.isfile(path):
            return None
        if os.path.commonpath([path, directory]) != directory:
            raise CorruptSavepointError(f"state file {location!r}: {name!r} in {where} is a link leading out of it",
                                        path=self.directory)
        return path

    def _inside(self, path: str) -> bool:
        return os.path.commonpath([path, self.directory]) == self.directory

    def _resolve(self, handle: StreamHandle) -> str:
        return self.local_path(handle)

    def _read(self, name: str) -> bytes | mmap.mmap:
        # A mapping keeps a file descriptor open: small files (most of a RocksDB checkpoint's) are
        # read instead, so thousands of them do not exhaust the process's descriptors.
        with typed_os_errors("reading a state file", name), open(name, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > _MAPPED_FROM_BYTES:
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            data = f.read(size + 1)
            if len(data) != size:
                raise StorageError(f"state file changed size while read ({size} bytes, then {len(data)})",
                                   path=name)
            return data

    def close(self) -> None:
        for buffer in self._files.values():
            if isinstance(buffer, mmap.mmap):
                try:
                    buffer.close()
                except BufferError:
                    pass  # views of it are still alive (e.g. in a traceback): unmapped when they go
        super().close()


class RemoteHandleStore(HandleStore):
    """The state files of a savepoint directory on an object store or HDFS, read whole
    through pyref's storage (:func:`pyref.storage.open_io`).

    Flink writes a canonical savepoint's state files into its directory, named by
    relative handles or by absolute URIs whose scheme and bucket may be spelled
    otherwise than the location given (``s3a://`` and ``s3p://`` for ``s3://``; a moved
    savepoint). Either way a state file is read from the directory only: a relative
    handle must be a safe relative path (spec/format.md §6.2), an absolute one names
    the file of its base name in the directory. The one exception is a retained
    checkpoint's: an absolute handle whose file lies in a ``shared`` or ``taskowned``
    directory other than the checkpoint's own names the file of its base name in the
    directory of that name beside the checkpoint (``../shared``: an incremental RocksDB
    checkpoint's files of earlier checkpoints; ForSt's DB files, the path below it kept, see
    :func:`checkpoint_sibling`). Nothing else outside is ever read.
    """

    def __init__(self, io: SavepointIO) -> None:
        super().__init__()
        self.io = io

    def _resolve(self, handle: StreamHandle) -> str:
        if handle.kind == "relative-file":
            if not is_safe_relative_path(handle.location):
                raise CorruptSavepointError(f"relative state path {handle.location!r} leaves the savepoint "
                                            "directory", path=self.io.describe(""))
            name = handle.location
        else:
            path = unquote(urlparse(handle.location).path)
            name = posixpath.basename(path)
            if not is_safe_relative_path(name):
                raise CorruptSavepointError(f"state file {handle.location!r} names no file",
                                            path=self.io.describe(""))
            sibling = checkpoint_sibling(path, merged=handle.kind == "segment")
            if sibling is not None and sibling[0] != self.io.name:
                return f"../{sibling[0]}/{sibling[1]}"  # never a name in the directory: those are safe relative paths
        return name

    def _read(self, name: str) -> bytes:
        # No stat first: a file already read is served from the cache without a request.
        io, file, where = self.io, name, "the savepoint directory"
        if name.startswith("../"):
            _, beside, file = name.split("/", 2)
            io, where = self.io.sibling(beside), f"the checkpoint's {beside} directory, beside it"
        try:
            return io.read_file(file)
        except SavepointNotFoundError:
            raise CorruptSavepointError(f"state file {file!r} is not in {where}", path=io.describe(file)) from None


def open_handle_store(location: str, *, allow_external_files: bool = False) -> HandleStore:
    """The handle store of the savepoint directory ``location`` (a local path or a URL
    :func:`pyref.location.parse_location` accepts)."""
    parsed = parse_location(location)
    if parsed.is_local:
        return LocalHandleStore(parsed.path, allow_external_files=allow_external_files)
    if allow_external_files:
        raise InvalidArgumentError("allow_external_files is for local savepoints only", path=location)
    return RemoteHandleStore(open_io(location))
