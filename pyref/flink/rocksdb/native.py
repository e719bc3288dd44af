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
dropped (after a rescale a file may still hold other key groups). The rows are the RocksDB
keys and values the savepoint format also carries, so :mod:`pyref.flink.keyed`'s decoding applies.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from ...errors import CorruptSavepointError
from ..composite import LIST_DELIMITER
from ..handles import IncrementalHandle, StreamHandle
from ..keyed import KeyedBackendMeta, KeyedRows, KeyedSubtask
from .sst import DELETION, MERGE, SINGLE_DELETION, VALUE, SstTable, read_sst

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


def live_rows(tables: list[SstTable], key_groups: range, prefix_bytes: int,
              where: str) -> dict[str, tuple[list[int], list[bytes], list[bytes]]]:
    """Per column family: (key group, user key, value) of every live key within ``key_groups``,
    ascending by key."""
    entries: dict[str, list[tuple[bytes, int, int, bytes]]] = {}
    tombstones: dict[str, list[tuple[bytes, bytes, int]]] = {}
    for t in tables:
        entries.setdefault(t.column_family, []).extend(zip(t.user_keys, t.sequences, t.types, t.values))
        tombstones.setdefault(t.column_family, []).extend(t.range_deletions)
    out: dict[str, tuple[list[int], list[bytes], list[bytes]]] = {}
    for family, rows in entries.items():
        groups: list[int] = []
        keys: list[bytes] = []
        values: list[bytes] = []
        ranges = sorted(tombstones[family])
        ordered = sorted(rows, key=lambda e: (e[0], -e[1]))  # per key, newest first
        active: list[tuple[int, bytes]] = []  # (-sequence, end) of range deletions begun by the current key
        r = i = 0
        while i < len(ordered):
            key = ordered[i][0]
            j = i
            while j < len(ordered) and ordered[j][0] == key:
                j += 1
            while r < len(ranges) and ranges[r][0] <= key:
                heapq.heappush(active, (-ranges[r][2], ranges[r][1]))
                r += 1
            while active and active[0][1] <= key:  # ended before this key, so before every later one
                heapq.heappop(active)
            value = _resolve(ordered[i:j], -active[0][0] if active else -1)
            i = j
            if value is None:
                continue
            if len(key) < prefix_bytes:
                raise CorruptSavepointError(f"column family {family!r} holds a key of {len(key)} bytes, shorter "
                                            f"than its {prefix_bytes}-byte key-group prefix", path=where)
            group = int.from_bytes(key[:prefix_bytes], "big")
            if group in key_groups:
                groups.append(group)
                keys.append(key)
                values.append(value)
        out[family] = (groups, keys, values)
    return out


def _resolve(versions: list[tuple[bytes, int, int, bytes]], deleted_below: int) -> bytes | None:
    """The live value of one user key from its entries, newest first (None: none)."""
    operands: list[bytes] = []
    base: bytes | None = None
    for _, sequence, kind, value in versions:
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


def iter_native_subtask(open_stream: Opener, handle: IncrementalHandle, subtask: int, prefix_bytes: int,
                        meta: KeyedBackendMeta, where: str) -> Iterator[KeyedSubtask]:
    """One subtask's native-format keyed state, as one run of rows per state."""
    tables = [read_sst(*open_stream(stream)) for _, stream in sst_files(handle)]
    live = live_rows(tables, handle.key_groups, prefix_bytes, where)
    names = {info.name for info in meta.states}
    unknown = sorted(f for f, (_, keys, _) in live.items() if keys and f not in names and f != DEFAULT_COLUMN_FAMILY)
    if unknown:
        raise CorruptSavepointError(f"RocksDB column families {unknown} hold state the meta infos do not name",
                                    path=where)
    states = {}
    for info in meta.states:
        groups, keys, values = live.get(info.name, ([], [], []))
        states[info.name] = (info, KeyedRows(np.full(len(keys), subtask, np.int64), np.array(groups, np.int64),
                                             pa.array(keys, pa.binary()), pa.array(values, pa.binary())))
    yield KeyedSubtask(subtask, handle.key_groups, meta.key_type, states)
