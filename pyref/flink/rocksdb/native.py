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

Each file is in internal-key order, so a column family's files are read as streams cut into
key groups (a key group and a batch of blocks of each in memory), a key group resolved as
columns when no entry of it hides or joins another and merged entry by entry otherwise; a
subtask is read in runs of whole key groups (``batch_bytes``), as the savepoint reader reads
its streams: memory holds a run, not the subtask's state.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptSavepointError
from ...serializers.base import _I32_MAX, range_mask
from ..composite import LIST_DELIMITER
from ..handles import IncrementalHandle, StreamHandle
from ..keyed import KeyedBackendMeta, KeyedRows, KeyedSubtask
from .sst import (BATCH_BLOCKS, DELETION, MERGE, SINGLE_DELETION, VALUE, DataBlock, ExpansionBudget, SstFile,
                  open_sst)

__all__ = ["ROCKSDB_NATIVE", "sst_files", "live_rows", "iter_native_subtask"]

ROCKSDB_NATIVE = "rocksdb-native"
#: RocksDB's column family that Flink never writes to.
DEFAULT_COLUMN_FAMILY = "default"
#: Data blocks a subtask's files decode at once in all (about 16 MiB of 4 KiB blocks), each file
#: its share of them, at least MIN_BATCH_BLOCKS (every file's stream holds its batch at once).
SUBTASK_BATCH_BLOCKS = 4096
MIN_BATCH_BLOCKS = 16

#: An SST file's bytes, the file they are in and where in it they start (a file merging's segment: anywhere).
Opener = Callable[[StreamHandle], tuple[bytes | memoryview, str, int]]


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


def live_rows(files: list[SstFile], key_groups: range, prefix_bytes: int, where: str, by_group: bool = True,
              batch_blocks: int = BATCH_BLOCKS) -> Iterator[tuple[int, pa.BinaryArray, pa.BinaryArray]]:
    """(key group, user keys, values) of the live keys of one column family's ``files`` within
    ``key_groups``, a key group at a time, ascending by key. Each file is cut into key groups; a
    key group no range deletion touches whose keys are one entry each (or, in several files,
    values only, from files of disjoint sequence ranges) is resolved as columns
    (:func:`_group_rows`); any other, and every one with ``by_group`` False, by merging the
    files' entries as streams (:func:`_merged_rows`). Each file decodes ``batch_blocks`` data
    blocks at a time."""
    family = files[0].column_family if files else DEFAULT_COLUMN_FAMILY
    ranges = sorted(r for f in files for r in f.range_deletions)
    if not by_group:
        yield from _merged_rows([f.entries() for f in files], ranges, key_groups, prefix_bytes, family, where)
        return
    streams = [_key_group_parts(f, prefix_bytes, batch_blocks) for f in files]
    heads = [next(stream, None) for stream in streams]
    while True:
        present = [head.group for head in heads if head is not None]
        if not present:
            return
        group = min(present)
        parts = []
        for i, head in enumerate(heads):
            if head is not None and head.group == group:
                parts.append(head)
                heads[i] = next(streams[i], None)
        short = any(part.short_keys for part in parts)
        if group not in key_groups and not short and _oldest_first(parts) is not None:
            continue  # none of its rows is read, and no two entries of a key can share a sequence number
        rows = None if short or group not in key_groups or _touched(ranges, group, prefix_bytes) else _group_rows(
            parts)
        if rows is None:  # entry by entry, as the streams' merge does (which also names a short key)
            yield from _merged_rows([part.entries() for part in parts], ranges, key_groups, prefix_bytes, family,
                                    where)
        elif len(rows[0]):
            yield group, rows[0], rows[1]


def _touched(ranges: list[tuple[bytes, bytes, int]], group: int, prefix_bytes: int) -> bool:
    """Whether a range deletion covers a key of key group ``group``."""
    low = group.to_bytes(prefix_bytes, "big")
    high = None if (group + 1) >> (8 * prefix_bytes) else (group + 1).to_bytes(prefix_bytes, "big")
    return any((high is None or start < high) and end > low for start, end, _ in ranges)


@dataclass
class _Part:
    """One file's entries of one key group, as columns."""

    group: int
    keys: pa.BinaryArray
    sequences: np.ndarray
    kinds: np.ndarray
    values: pa.BinaryArray
    unique: bool  # every key one entry
    short_keys: bool  # a key shorter than the key-group prefix (its group is its zero-padded prefix)

    def entries(self) -> Iterator[tuple[bytes, int, int, bytes]]:
        return zip(self.keys.to_pylist(), self.sequences.tolist(), self.kinds.tolist(), self.values.to_pylist())


def _key_group_parts(sst: SstFile, prefix_bytes: int, batch_blocks: int) -> Iterator[_Part]:
    """The file's entries cut into key groups (keys ascend, so each key group's are contiguous)."""
    pieces: list[tuple[DataBlock, int, int, bool]] = []  # (block, start, stop, short) of the key group gathered
    group = -1
    for block in sst.blocks(batch_blocks):
        if not len(block.keys):
            continue
        for piece_group, start, stop, short in _group_spans(block.keys, prefix_bytes):
            if piece_group != group and pieces:
                yield _joined(group, pieces)
                pieces = []
            group = piece_group
            pieces.append((block, start, stop, short))
    if pieces:
        yield _joined(group, pieces)


def _binary_buffers(array: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data) of a binary array without nulls, as numpy views: the i-th value is
    ``data[offsets[i]:offsets[i + 1]]``."""
    _, offsets, data = array.buffers()
    assert offsets is not None
    return (np.frombuffer(offsets, np.int32)[array.offset:array.offset + len(array) + 1],
            np.zeros(0, np.uint8) if data is None else np.frombuffer(data, np.uint8))


def _group_spans(keys: pa.BinaryArray, prefix_bytes: int) -> Iterator[tuple[int, int, int, bool]]:
    """(key group, start, stop, whether a key is shorter than the prefix) of each key group's run
    of the sorted ``keys``; a key shorter than the prefix (hostile or damaged bytes) is of the
    group of its prefix padded with zero bytes."""
    offsets, data = _binary_buffers(keys)
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets)
    padded = np.append(data, np.zeros(prefix_bytes, np.uint8))  # a short key's missing bytes read as zero
    groups = np.zeros(len(keys), np.int64)
    for k in range(prefix_bytes):
        groups = (groups << 8) | np.where(lengths > k, padded[np.minimum(starts + k, len(data))], 0)
    bounds = np.concatenate([[0], np.flatnonzero(groups[1:] != groups[:-1]) + 1, [len(keys)]]).tolist()
    short = np.concatenate([[0], np.cumsum(lengths < prefix_bytes)])[bounds]  # short keys before each bound
    for i, (start, stop) in enumerate(itertools.pairwise(bounds)):
        yield int(groups[start]), start, stop, bool(short[i + 1] > short[i])


def _joined(group: int, pieces: list[tuple[DataBlock, int, int, bool]]) -> _Part:
    short = any(piece[3] for piece in pieces)
    if len(pieces) == 1:
        block, start, stop, _ = pieces[0]
        return _Part(group, block.keys.slice(start, stop - start), block.sequences[start:stop],
                     block.kinds[start:stop], block.values.slice(start, stop - start), block.unique, short)
    return _Part(group, pa.concat_arrays([b.keys.slice(s, e - s) for b, s, e, _ in pieces]),
                 np.concatenate([b.sequences[s:e] for b, s, e, _ in pieces]),
                 np.concatenate([b.kinds[s:e] for b, s, e, _ in pieces]),
                 pa.concat_arrays([b.values.slice(s, e - s) for b, s, e, _ in pieces]),
                 all(b.unique for b, _, _, _ in pieces), short)


def _group_rows(parts: list[_Part]) -> tuple[pa.BinaryArray, pa.BinaryArray] | None:
    """The live (keys, values) of one key group's ``parts`` when no entry hides or joins another
    (None: merge them entry by entry): a key of one entry is live unless a deletion, its value a
    value's or a LIST state's one append; a key in several files with values only takes the newest
    file's value, the files' sequence ranges being disjoint."""
    if not all(part.unique for part in parts):
        return None
    if len(parts) == 1:
        return _live_alone(parts[0])
    oldest_first = _oldest_first(parts)
    newest_first = parts if oldest_first is None else oldest_first[::-1]
    keys = pa.concat_arrays([part.keys for part in newest_first])
    values = pa.concat_arrays([part.values for part in newest_first])
    kinds = np.concatenate([part.kinds for part in newest_first])
    order, repeated = _ranged(newest_first) or _sorted(keys)  # stable: a key's newest file's entry first
    if repeated.any():
        if oldest_first is None or (kinds != VALUE).any():
            return None
        chosen = order[~repeated]  # each key's newest value
    else:
        chosen = order[~_deleted(kinds[order])]
    return keys.take(chosen), values.take(chosen)


def _ranged(parts: list[_Part]) -> tuple[np.ndarray, np.ndarray] | None:
    """What :func:`_sorted` gives for the parts' keys laid end to end, without sorting, when the
    parts hold disjoint key ranges (as compacted files of one level do): the parts in the order
    of their ranges, no key repeated. None when their ranges overlap."""
    bounds = sorted((part.keys[0].as_py(), part.keys[-1].as_py(), i) for i, part in enumerate(parts))
    if any(last >= first for (_, last, _), (first, _, _) in itertools.pairwise(bounds)):
        return None
    starts = np.cumsum([0] + [len(part.keys) for part in parts])
    order = np.concatenate([np.arange(starts[i], starts[i + 1]) for _, _, i in bounds])
    return order, np.zeros(len(order), bool)


#: Keys up to this long are sorted as fixed-width numpy byte strings (padded, length appended);
#: longer ones by Arrow, which compares them in place but sorts a few times slower.
_MAX_FIXED_SORT_WIDTH = 64


def _sorted(keys: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray]:
    """The stable order of ``keys`` bytewise ascending (equal keys keep their places), and for
    each key in that order whether it equals the one before it."""
    offsets, data = _binary_buffers(keys)
    lengths = np.diff(offsets)
    width = int(lengths.max(initial=0))
    repeated = np.zeros(len(keys), bool)
    if width > _MAX_FIXED_SORT_WIDTH:
        order = np.asarray(pc.sort_indices(keys), np.int64)
        if len(keys) > 1:
            ordered = keys.take(order)
            repeated[1:] = np.asarray(pc.equal(ordered.slice(1), ordered.slice(0, len(keys) - 1)))
        return order, repeated
    # Zero-padded to one width with the length after: padding never ties a key with a longer one
    # it prefixes (b"a" + 0s, 1 < b"a\0" + 0s, 2), and numpy compares equal-width strings bytewise.
    stride = width + 1
    table = np.zeros((len(keys), stride), np.uint8)
    table.reshape(-1)[range_mask(np.arange(len(keys), dtype=np.int64) * stride, lengths, table.size)] = (
        data[offsets[0]:offsets[-1]])
    table[:, width] = lengths
    fixed = table.view(f"S{stride}").reshape(-1)
    order = np.argsort(fixed, kind="stable")
    ordered = fixed[order]
    repeated[1:] = ordered[1:] == ordered[:-1]
    return order, repeated


def _oldest_first(parts: list[_Part]) -> list[_Part] | None:
    """The parts by their sequence numbers, oldest first, if their ranges are disjoint (None if not)."""
    ordered = sorted(parts, key=lambda part: int(part.sequences.min()))
    if any(int(a.sequences.max()) >= int(b.sequences.min()) for a, b in itertools.pairwise(ordered)):
        return None
    return ordered


def _deleted(kinds: np.ndarray) -> np.ndarray:
    return (kinds == DELETION) | (kinds == SINGLE_DELETION)


def _live_alone(part: _Part) -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """The live keys and values of a part whose keys are one entry each (no other file's)."""
    deleted = _deleted(part.kinds)
    if not deleted.any():
        return part.keys, part.values
    live = np.flatnonzero(~deleted)
    return part.keys.take(live), part.values.take(live)


def _merged_rows(streams: list[Iterator[tuple[bytes, int, int, bytes]]], ranges: list[tuple[bytes, bytes, int]],
                 key_groups: range, prefix_bytes: int, family: str,
                 where: str) -> Iterator[tuple[int, pa.BinaryArray, pa.BinaryArray]]:
    """(key group, user keys, values) of the live keys within ``key_groups`` of entry streams,
    each in internal-key order (ascending key, newest first), merged; ``ranges``: the range
    deletions, sorted."""
    active: list[tuple[int, bytes]] = []  # (-sequence, end) of range deletions begun by the current key
    r = 0
    merged = heapq.merge(*streams, key=lambda e: (e[0], -e[1]))
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
            raise _twice(family, key, newest[1], where)
        deleted_below = -active[0][0] if active else -1
        if newest[2] == VALUE and newest[1] >= deleted_below:
            value = newest[3]  # the common case: the newest entry is a live value
        elif older is None and newest[2] == MERGE and newest[1] >= deleted_below:
            value = newest[3]  # a LIST state's one append, with nothing under it
        else:
            resolved = _resolve(itertools.chain((newest,), () if older is None else (older,), versions),
                                deleted_below, family, where)
            if resolved is None:
                continue
            value = resolved
        if len(key) < prefix_bytes:
            raise CorruptSavepointError(f"column family {family!r} holds a key of {len(key)} bytes, "
                                        f"shorter than its {prefix_bytes}-byte key-group prefix", path=where)
        key_group = int.from_bytes(key[:prefix_bytes], "big")
        if key_group != group:
            if keys:
                yield group, pa.array(keys, pa.binary()), pa.array(values, pa.binary())
            group, keys, values = key_group, [], []
        if group not in key_groups:
            continue
        keys.append(key)
        values.append(value)
    if keys:
        yield group, pa.array(keys, pa.binary()), pa.array(values, pa.binary())


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

    def __init__(self, rows: Iterator[tuple[int, pa.BinaryArray, pa.BinaryArray]]) -> None:
        self._rows = rows
        self.head = next(rows, None)
        self.groups: list[np.ndarray] = []
        self.keys: list[pa.BinaryArray] = []
        self.values: list[pa.BinaryArray] = []

    def take(self, group: int) -> int:
        """Move the rows of key group ``group`` into the run; the bytes they hold."""
        if self.head is None or self.head[0] != group:
            return 0
        _, keys, values = self.head
        self.groups.append(np.full(len(keys), group, np.int64))
        self.keys.append(keys)
        self.values.append(values)
        self.head = next(self._rows, None)
        return _data_bytes(keys) + _data_bytes(values)

    def run(self, subtask: int) -> KeyedRows:
        if not self.keys:  # most states of most runs: one shared empty table
            return _NO_ROWS
        groups = np.concatenate(self.groups)
        rows = KeyedRows(np.full(len(groups), subtask, np.int64), groups, _concat(self.keys), _concat(self.values))
        self.groups, self.keys, self.values = [], [], []
        return rows


def _data_bytes(array: pa.BinaryArray) -> int:
    offsets, _ = _binary_buffers(array)
    return int(offsets[-1] - offsets[0])


def _concat(arrays: list[pa.BinaryArray]) -> pa.Array:
    """The arrays as one, large_binary when its bytes pass binary's 2 GiB offsets."""
    if sum(map(_data_bytes, arrays)) > _I32_MAX:
        arrays = [array.cast(pa.large_binary()) for array in arrays]
    return pa.concat_arrays(arrays)


def iter_native_subtask(open_stream: Opener, handle: IncrementalHandle, subtask: int, prefix_bytes: int,
                        meta: KeyedBackendMeta, where: str, batch_bytes: int | None = None) -> Iterator[KeyedSubtask]:
    """One subtask's native-format keyed state as runs of whole key groups of about
    ``batch_bytes`` bytes of keys and values each (None: one run); every run lists every state."""
    by_family: dict[str, list[SstFile]] = {}
    opened = [open_stream(stream) for _, stream in sst_files(handle)]
    budget = ExpansionBudget(sum(len(data) for data, _, _ in opened))  # one for all: many small files add no allowance
    for data, name, base in opened:
        sst = open_sst(data, name, budget, base)
        by_family.setdefault(sst.column_family, []).append(sst)

    # Every file's stream holds a batch of blocks at once: many files share SUBTASK_BATCH_BLOCKS.
    batch_blocks = max(MIN_BATCH_BLOCKS, min(BATCH_BLOCKS, SUBTASK_BATCH_BLOCKS // max(len(opened), 1)))

    def rows(family: str) -> Iterator[tuple[int, pa.BinaryArray, pa.BinaryArray]]:
        return live_rows(by_family.get(family, []), handle.key_groups, prefix_bytes, where, batch_blocks=batch_blocks)

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
