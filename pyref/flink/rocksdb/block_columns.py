"""RocksDB data blocks decoded many at once with numpy, as columns.

A block's entries are read one after another (each entry's place follows from the previous
one's lengths), but every restart point begins an entry that shares no key bytes, so the
restart intervals of many blocks are walked side by side: step k reads the k-th entry of every
interval (three varints), and a key's shared bytes are copied from the key of the entry before
it, decoded a step earlier. The result equals the entry-by-entry read (:meth:`_Reader.columns`)
whenever the blocks have the plain layout RocksDB writes: restart points ascending from 0, each
interval's entries ending exactly at the next one, no key sharing bytes at a restart point, no
key shorter than its 8-byte internal-key trailer. Anything else gives None, and the caller reads
those blocks entry by entry, which names what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ...serializers.base import range_indices, range_mask

__all__ = ["BlockColumns", "decode_data_blocks"]

#: Entries per restart interval walked side by side (RocksDB's default interval is 16); an
#: interval of more is read entry by entry.
MAX_INTERVAL_ENTRIES = 128
_PADDING = bytes(32)  # over-reads of three 5-byte varints past a block's end land here
_MAX_POSITION = 1 << 31  # positions in a batch and its keys are int32


@dataclass
class BlockColumns:
    """The entries of a batch of data blocks, in their order: user keys, internal-key trailers,
    values, as whole columns (the blocks' bytes gathered, no Python object per entry)."""

    user_keys: pa.BinaryArray
    trailers: np.ndarray  # uint64: sequence << 8 | type
    values: pa.BinaryArray
    #: Where each block's entries end (cumulative entry counts).
    ends: np.ndarray
    #: Key bytes each block's entries expand to (what the entry-by-entry read charges the file's budget).
    expanded: np.ndarray

    def block(self, i: int) -> tuple[pa.BinaryArray, np.ndarray, pa.BinaryArray]:
        """(user keys, trailers, values) of the batch's ``i``-th block."""
        start = int(self.ends[i - 1]) if i else 0
        stop = int(self.ends[i])
        return (self.user_keys.slice(start, stop - start), self.trailers[start:stop],
                self.values.slice(start, stop - start))


def decode_data_blocks(blocks: list[bytes], limits: list[int], restart_counts: list[int],
                       budget: int) -> BlockColumns | None:
    """The entries of ``blocks`` (each's entries end at its ``limits``, followed by
    ``restart_counts`` uint32 restart offsets), or None: not the plain layout, or keys that expand
    beyond ``budget`` bytes in all."""
    joined = b"".join(blocks)
    if len(joined) >= _MAX_POSITION:
        return None
    buf = np.frombuffer(joined + _PADDING, np.uint8)
    bases = np.cumsum([0] + [len(b) for b in blocks])
    intervals = _intervals(buf, bases[:-1], np.array(limits, np.int64), np.array(restart_counts, np.int64))
    if intervals is None:
        return None
    heads = _walk(buf, *intervals)
    if heads is None:
        return None
    shared, unshared, lengths, key_at, step = heads
    sizes = shared + unshared
    later = step[1:] > 0  # entries after their interval's first: they share the previous key's bytes
    if (shared[1:][later] > sizes[:-1][later]).any() or (sizes < 8).any():
        return None  # a key sharing more than the previous one has, or too short for its trailer
    block_of = np.searchsorted(bases, key_at, "right") - 1
    expanded = np.bincount(block_of, weights=sizes, minlength=len(blocks)).astype(np.int64)
    if int(expanded.sum()) > min(budget, _MAX_POSITION):
        return None
    user_sizes = sizes - 8
    if (unshared >= 8).all() and not (shared[1:][later] > user_sizes[:-1][later]).any():
        # Every trailer in its entry's own bytes, no key sharing one (no user key twice in a row):
        # the user keys alone are laid down, the trailers read in place.
        user_bytes = _keys(buf, shared, unshared - 8, key_at, step, np.cumsum(user_sizes) - user_sizes,
                           int(user_sizes.sum()))
        trailers = np.lib.stride_tricks.sliding_window_view(buf, 8)[key_at + unshared - 8].reshape(-1).view("<u8")
    else:
        key_starts = np.cumsum(sizes) - sizes
        key_bytes = _keys(buf, shared, unshared, key_at, step, key_starts, int(sizes.sum()))
        in_user_key = range_mask(key_starts, user_sizes, len(key_bytes))  # the rest: each key's trailer
        trailers = key_bytes[~in_user_key].view("<u8")
        user_bytes = key_bytes[in_user_key]
    user_keys = _binary(user_bytes, user_sizes)
    values = _binary(buf[range_mask(key_at + unshared, lengths, len(buf))], lengths)
    ends = np.cumsum(np.bincount(block_of, minlength=len(blocks)))
    return BlockColumns(user_keys, trailers, values, ends, expanded)


def _intervals(buf: np.ndarray, bases: np.ndarray, limits: np.ndarray,
               counts: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(start, stop) in ``buf`` of every restart interval of the blocks at ``bases``; None unless
    each block's restart offsets ascend from 0 and none is past its entries' end."""
    restarts = buf[range_indices(bases + limits, 4 * counts, np.int32)].view("<u4").astype(np.int64)
    block_of = np.repeat(np.arange(len(bases)), counts)
    firsts = np.cumsum(counts) - counts
    lasts = firsts + counts - 1
    ascending = (np.diff(restarts) > 0) | (block_of[1:] != block_of[:-1])
    if restarts[firsts].any() or (restarts[lasts] > limits).any() or not ascending.all():
        return None
    stops = np.empty_like(restarts)
    stops[:-1] = restarts[1:]
    stops[lasts] = limits
    return restarts + bases[block_of], stops + bases[block_of]


def _walk(buf: np.ndarray, starts: np.ndarray,
          stops: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(shared, unshared, value length, where the unshared key bytes start, place in the interval)
    of every entry, in the blocks' order; None unless every interval's entries end exactly at its
    stop within MAX_INTERVAL_ENTRIES and begin with one sharing nothing."""
    at = starts.copy()
    steps: list[tuple[np.ndarray, ...]] = []
    for step in range(MAX_INTERVAL_ENTRIES + 1):
        live = np.flatnonzero(at < stops)
        if not live.size:
            break
        if step == MAX_INTERVAL_ENTRIES:
            return None
        heads = []
        here = at[live]
        for _ in range(3):
            read = _varints(buf, here)
            if read is None:
                return None
            value, here = read
            heads.append(value)
        shared, unshared, length = heads
        end = here + unshared + length
        if (end > stops[live]).any() or (step == 0 and shared.any()):
            return None
        steps.append((shared, unshared, length, here, np.full(live.size, step, np.int64)))
        at[live] = end
    if not steps:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty, empty
    columns = [np.concatenate(c) for c in zip(*steps)]
    order = np.argsort(columns[3], kind="stable")
    shared, unshared, length, key_at, step_of = (c[order] for c in columns)
    return shared, unshared, length, key_at, step_of


def _varints(buf: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The varint32 at each of ``at`` and where each ends; None: one longer than 5 bytes."""
    byte = buf[at].astype(np.int64)
    value = byte & 0x7F
    more = byte >= 0x80
    size = np.ones_like(at)
    for k in range(1, 5):
        if not more.any():
            return value, at + size
        byte = buf[at + k].astype(np.int64)
        value |= np.where(more, (byte & 0x7F) << (7 * k), 0)
        size += more
        more &= byte >= 0x80
    return None if more.any() else (value, at + size)


def _binary(data: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
    """A binary array of the values laid end to end in ``data``, of ``lengths`` bytes each."""
    offsets = np.zeros(len(lengths) + 1, np.int32)  # a batch is below 2 GiB
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _keys(buf: np.ndarray, shared: np.ndarray, unshared: np.ndarray, key_at: np.ndarray, step: np.ndarray,
          key_starts: np.ndarray, size: int) -> np.ndarray:
    """The keys laid end to end (``size`` bytes): the unshared bytes copied from the blocks at
    once, then the shared ones from the previous key's, a step of the intervals at a time (the
    previous key is whole by then)."""
    keys = np.empty(size, np.uint8)
    keys[range_mask(key_starts + shared, unshared, size)] = buf[range_mask(key_at, unshared, len(buf))]
    for k in range(1, int(step.max(initial=0)) + 1):
        entries = np.flatnonzero((step == k) & (shared > 0))
        counts = shared[entries]
        keys[range_indices(key_starts[entries], counts, np.int32)] = keys[
            range_indices(key_starts[entries - 1], counts, np.int32)]
    return keys
