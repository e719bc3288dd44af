"""The live keyed state of one RocksDB native-format handle (``IncrementalRemoteKeyedStateHandle``),
as the rows the savepoint reader yields.

The handle's meta stream is the ``KeyedBackendSerializationProxy`` (state meta infos), its
``*.sst`` files are the live files of the subtask's RocksDB instance (RocksDB's own ``MANIFEST``,
``CURRENT`` and ``OPTIONS`` files are not needed: every SST file a checkpoint names is live). Each
state is a column family of the state's name (a timer queue too: ``_timer_state/...``). Per
column family and user key, the entries of all files are taken newest (highest sequence number)
first: a value ends the walk, a deletion hides everything older, merge operands (LIST state's
appends) are collected and joined oldest first after the value they apply to with the byte ``,``
(RocksDB's ``StringAppendTESTOperator``, which Flink sets); a range deletion hides the older
entries of the keys it covers. Keys whose key-group prefix lies outside the handle's range are
dropped (after a rescale a file may still hold other key groups). Files a restore with
``use-ingest-db-restore-mode`` imported keep the sequence numbers of the old subtask's database
that wrote them: two old databases' numbers overlap, but never over one key (their key groups
are disjoint, and RocksDB numbers every later write above them), so the order stays RocksDB's. The rows are the RocksDB
keys and values the savepoint format also carries, so :mod:`pyref.flink.keyed`'s decoding applies.

Each file is in internal-key order, so a column family's files merge as streams (a block of
each in memory) and a subtask is read in runs of whole key groups (``batch_bytes``), as the
savepoint reader reads its streams: memory holds a run, not the subtask's state.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter

import numpy as np
import pyarrow as pa

from ...errors import CorruptSavepointError
from ..composite import LIST_DELIMITER
from ..handles import IncrementalHandle, StreamHandle
from ..keyed import KeyedBackendMeta, KeyedRows, KeyedSubtask
from .sst import DELETION, MERGE, SINGLE_DELETION, VALUE, ExpansionBudget, SstFile, open_sst

__all__ = ["ROCKSDB_NATIVE", "sst_files", "live_rows", "iter_native_subtask"]

ROCKSDB_NATIVE = "rocksdb-native"
#: RocksDB's column family that Flink never writes to.
DEFAULT_COLUMN_FAMILY = "default"

Opener = Callable[[StreamHandle], tuple[bytes | memoryview, str]]


def sst_files(handle: IncrementalHandle) -> list[tuple[str, StreamHandle]]:
    """(RocksDB file name, stream) of every SST file of the handle, shared and private."""
    files = []
    for local, stream in handle.shared + handle.private:
        if local.endswith(".sst"):
            if stream is None:
                raise CorruptSavepointError(f"RocksDB file {local} of key groups {handle.key_groups.start}.."
                                            f"{handle.key_groups.stop - 1} has no state handle")
            files.append((local, stream))
    return files


def live_rows(files: list[SstFile], key_groups: range, prefix_bytes: int,
              where: str) -> Iterator[tuple[int, list[bytes], list[bytes]]]:
    """(key group, user keys, values) of the live keys of one column family's ``files`` within
    ``key_groups``, a key group at a time, ascending by key: the files' entries merged as streams,
    each already in internal-key order (ascending key, newest first)."""
    ranges = sorted(r for f in files for r in f.range_deletions)
    active: list[tuple[int, bytes]] = []  # (-sequence, end) of range deletions begun by the current key
    r = 0
    merged = heapq.merge(*(f.entries() for f in files), key=lambda e: (e[0], -e[1]))
    group = -1  # the key group being gathered, and its rows
    keys: list[bytes] = []
    values: list[bytes] = []
    for key, versions in itertools.groupby(merged, key=itemgetter(0)):
        if ranges:
            while r < len(ranges) and ranges[r][0] <= key:
                heapq.heappush(active, (-ranges[r][2], ranges[r][1]))
                r += 1
            while active and active[0][1] <= key:  # ended before this key, so before every later one
                heapq.heappop(active)
        newest = next(versions)
        older = next(versions, None)
        if older is not None and older[1] == newest[1]:
            raise _twice(files[0].column_family, key, newest[1], where)
        deleted_below = -active[0][0] if active else -1
        if newest[2] == VALUE and newest[1] >= deleted_below:
            value = newest[3]  # the common case: the newest entry is a live value
        elif older is None and newest[2] == MERGE and newest[1] >= deleted_below:
            value = newest[3]  # a LIST state's one append, with nothing under it
        else:
            resolved = _resolve(itertools.chain((newest,), () if older is None else (older,), versions),
                                deleted_below, files[0].column_family, where)
            if resolved is None:
                continue
            value = resolved
        if len(key) < prefix_bytes:
            raise CorruptSavepointError(f"column family {files[0].column_family!r} holds a key of {len(key)} bytes, "
                                        f"shorter than its {prefix_bytes}-byte key-group prefix", path=where)
        key_group = int.from_bytes(key[:prefix_bytes], "big")
        if key_group != group:
            if keys:
                yield group, keys, values
            group, keys, values = key_group, [], []
        if group not in key_groups:
            continue
        keys.append(key)
        values.append(value)
    if keys:
        yield group, keys, values


def _twice(family: str, key: bytes, sequence: int, where: str) -> CorruptSavepointError:
    return CorruptSavepointError(f"column family {family!r} holds two entries of key {key[:32].hex()} with sequence "
                                 f"number {sequence} (an SST file listed twice, or files of one database that "
                                 "disagree): RocksDB numbers every write once", path=where)


def _resolve(versions: Iterable[tuple[bytes, int, int, bytes]], deleted_below: int, family: str,
             where: str) -> bytes | None:
    """The live value of one user key from its entries, newest first (None: none)."""
    operands: list[bytes] = []
    base: bytes | None = None
    previous = -1
    for key, sequence, kind, value in versions:
        if sequence == previous:
            raise _twice(family, key, sequence, where)
        previous = sequence
        if sequence < deleted_below:  # a range deletion hides this and everything older
            break
        if kind == MERGE:
            operands.append(value)
            continue
        if kind == VALUE:
            base = value
        else:
            assert kind in (DELETION, SINGLE_DELETION)
        break
    if not operands:
        return base
    joined = bytes([LIST_DELIMITER]).join(reversed(operands))
    return joined if base is None else base + bytes([LIST_DELIMITER]) + joined


# pa.nulls, not pa.array: pa.array imports pandas (to test for its objects), and the CLI must start without it.
_NO_ROWS = KeyedRows(np.zeros(0, np.int64), np.zeros(0, np.int64), pa.nulls(0, pa.binary()), pa.nulls(0, pa.binary()))


class _State:
    """One state's live rows as a stream, taken a key group at a time."""

    def __init__(self, rows: Iterator[tuple[int, list[bytes], list[bytes]]]) -> None:
        self._rows = rows
        self.head = next(rows, None)
        self.groups: list[np.ndarray] = []
        self.keys: list[bytes] = []
        self.values: list[bytes] = []

    def take(self, group: int) -> int:
        """Move the rows of key group ``group`` into the run; the bytes they hold."""
        if self.head is None or self.head[0] != group:
            return 0
        _, keys, values = self.head
        self.groups.append(np.full(len(keys), group, np.int64))
        self.keys += keys
        self.values += values
        self.head = next(self._rows, None)
        return sum(map(len, keys)) + sum(map(len, values))

    def run(self, subtask: int) -> KeyedRows:
        if not self.keys:  # most states of most runs: one shared empty table
            return _NO_ROWS
        groups = np.concatenate(self.groups)
        rows = KeyedRows(np.full(len(self.keys), subtask, np.int64), groups,
                         pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()))
        self.groups, self.keys, self.values = [], [], []
        return rows


def iter_native_subtask(open_stream: Opener, handle: IncrementalHandle, subtask: int, prefix_bytes: int,
                        meta: KeyedBackendMeta, where: str, batch_bytes: int | None = None) -> Iterator[KeyedSubtask]:
    """One subtask's native-format keyed state as runs of whole key groups of about
    ``batch_bytes`` bytes of keys and values each (None: one run); every run lists every state."""
    by_family: dict[str, list[SstFile]] = {}
    opened = [open_stream(stream) for _, stream in sst_files(handle)]
    budget = ExpansionBudget(sum(len(data) for data, _ in opened))  # one for all: many small files add no allowance
    for data, name in opened:
        sst = open_sst(data, name, budget)
        by_family.setdefault(sst.column_family, []).append(sst)

    def rows(family: str) -> Iterator[tuple[int, list[bytes], list[bytes]]]:
        return live_rows(by_family.get(family, []), handle.key_groups, prefix_bytes, where)

    names = {info.name for info in meta.states}
    unknown = sorted(f for f in by_family if f not in names and f != DEFAULT_COLUMN_FAMILY
                     and next(rows(f), None) is not None)
    if unknown:
        raise CorruptSavepointError(f"RocksDB column families {unknown} hold state the meta infos do not name",
                                    path=where)
    states = {info.name: (info, _State(rows(info.name))) for info in meta.states}
    streams = [state for _, state in states.values()]
    # (next key group, stream) of the states with rows left: each key group visits only the states
    # holding it, so many states (a long meta stream) do not multiply the work per key group.
    pending = [(state.head[0], i) for i, state in enumerate(streams) if state.head is not None]
    heapq.heapify(pending)
    while True:
        taken = 0
        while pending and (batch_bytes is None or taken < batch_bytes):
            group = pending[0][0]
            while pending and pending[0][0] == group:
                _, i = heapq.heappop(pending)
                taken += streams[i].take(group)
                head = streams[i].head
                if head is not None:
                    heapq.heappush(pending, (head[0], i))
        yield KeyedSubtask(subtask, handle.key_groups, meta.key_type,
                           {name: (info, state.run(subtask)) for name, (info, state) in states.items()})
        if not pending:
            return
