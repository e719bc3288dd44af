"""RocksDB block-based table (SST) files, as Flink's RocksDB and ForSt backends write them.

A file is blocks, each followed by a 5-byte trailer (compression type, uint32 LE checksum of
the block's bytes and the type byte), then a footer at the file's end:

* format_version 0 (legacy magic ``0xdb4775248b80fb57``, 48 bytes): metaindex and index block
  handles (varint64 offset, varint64 size each), zero padding to 40 bytes, the magic; crc32c.
* format_version 1..5 (magic ``0x88e241b785f4cff7``, 53 bytes): checksum type byte, the two
  handles padded to 40 bytes, uint32 LE format_version, the magic.
* format_version 6: checksum type byte, ``3e 00 7a 00``, uint32 footer checksum (of the footer
  with this field zeroed, plus the context modifier at the footer's offset), uint32 base context
  checksum, uint32 metaindex size (the metaindex ends right before the footer, less its
  trailer), 24 zero bytes, format_version, magic; the index handle is the metaindex's
  ``rocksdb.index`` entry. Every block checksum adds ``base ^ (lo32(offset) + hi32(offset))``.

A block: entries (varint32 shared key bytes, varint32 unshared, varint32 value length, the
unshared key bytes, the value), uint32 LE restart offsets, and a uint32 LE count whose top bit
says a data-block hash index (uint8 buckets, uint16 bucket count) sits between restarts and
count. An index block whose keys delta-encode values (property ``rocksdb.index.value.is.delta.
encoded``, format_version >= 4) omits the value length: a restart entry holds the full handle, an
entry sharing key bytes a varsigned64 size delta, its offset right after the previous block.
A partitioned index (``rocksdb.block.based.table.index.type`` 2, kTwoLevelIndexSearch: ForSt's
default, ``state.backend.forst.memory.partitioned-index-filters``) is a top-level index block,
the one the footer or metaindex names, whose entries are the handles of index partitions (the
same delta encoding; written one after another, property ``rocksdb.index.partitions`` counts
them), each an index block of data block handles as above.

Data keys are internal keys: the user key and uint64 LE ``sequence << 8 | type``. A file written
outside the database (``SstFileWriter``, then ``IngestExternalFile``; property
``rocksdb.external_sst_file.version``) stores sequence 0 in every key: RocksDB gives all its
entries one global sequence number, kept in the ``MANIFEST`` and, when RocksDB wrote it back
into the file, in the property ``rocksdb.external_sst_file.global_seqno`` (see
:func:`global_sequence`). Flink's RocksDB backend never ingests such files (its
``use-ingest-db-restore-mode`` imports column families, whose files keep their own numbers).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import cramjam
import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...codecs import MAX_ZSTD_RATIO
from ...errors import CorruptSavepointError, SavepointError, UnsupportedFormatError
from ..dataoutput import varint
from .block_columns import BlockColumns, decode_data_blocks

__all__ = ["SstFile", "ExpansionBudget", "open_sst", "global_sequence", "VALUE", "DELETION", "SINGLE_DELETION",
           "MERGE", "RANGE_DELETION"]

LEGACY_MAGIC = 0xDB4775248B80FB57
BLOCK_BASED_MAGIC = 0x88E241B785F4CFF7
_LEGACY_FOOTER = 48
_FOOTER = 53
_TRAILER = 5
_EXTENDED_MAGIC = b"\x3e\x00\x7a\x00"
_MAX_FORMAT_VERSION = 6
#: No block Flink writes comes near this; a larger declared size is refused before allocating it.
MAX_BLOCK_BYTES = 64 << 20
#: How many times its files' bytes a handle's blocks may decompress and its keys expand to, beyond
#: MAX_BLOCK_BYTES: far above real state (Snappy, Flink's default, expands at most 22 times; long
#: keys sharing prefixes a few times), yet still work linear in the bytes present.
EXPANSION_RATIO = 1024
#: Data blocks a file decodes at once (about 1 MiB of RocksDB's 4 KiB blocks): the work per numpy
#: call; a subtask of many files gives each fewer (:mod:`.native`).
BATCH_BLOCKS = 256

# Value types of internal keys (db/dbformat.h).
DELETION, VALUE, MERGE, SINGLE_DELETION, RANGE_DELETION = 0x0, 0x1, 0x2, 0x7, 0xF
_ENTRY_TYPES = frozenset((VALUE, DELETION, SINGLE_DELETION, MERGE))  # what a data block may hold
_DATA_KINDS = np.isin(np.arange(256), sorted(_ENTRY_TYPES))
_TYPE_NAMES = {0x3: "log data", 0x4: "column family deletion", 0x5: "column family value",
               0x6: "column family merge", 0x10: "column family range deletion", 0x11: "blob index",
               0x14: "deletion with timestamp", 0x15: "wide-column entity (column family)",
               0x16: "wide-column entity", 0x18: "value with preferred sequence number"}

_COMPRESSION = {0: "none", 1: "snappy", 2: "zlib", 3: "bzip2", 4: "lz4", 5: "lz4hc", 6: "xpress", 7: "zstd"}
#: The most a stored byte of a block can decompress to, by each format: Snappy's densest element
#: is a 3-byte copy of 64 bytes, each LZ4 match-length byte adds at most 255, a zstd RLE block
#: is 4 bytes for 128 KiB (spec/security.md §6, rule Z1). A larger declared size is a lie,
#: refused before its buffer is allocated.
_MAX_RATIO = {1: 22, 4: 255, 5: 255, 7: MAX_ZSTD_RATIO}
_CHECKSUMS = {0: "none", 1: "crc32c", 2: "xxhash", 3: "xxhash64", 4: "XXH3"}
_HASH_INDEX_BIT = 1 << 31
_OTHER_FOOTER_BITS = 0x70000000  # newer data-block layouts (uniform keys, separated values)
_INDEX_TYPES = {0: "binary search", 1: "hash search", 2: "partitioned (two-level)",
                3: "binary search with first key"}
BINARY_SEARCH_INDEX, PARTITIONED_INDEX = 0, 2

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class ExpansionBudget:
    """What the blocks of a subtask's SST files may decompress to, and their keys expand to, in
    all: 64 MiB plus :data:`EXPANSION_RATIO` times the files' bytes. Shared by the files of one read,
    so that many small files do not each bring a fixed allowance (a hostile block repeats a long key
    cheaply)."""

    def __init__(self, file_bytes: int) -> None:
        self.left = MAX_BLOCK_BYTES + EXPANSION_RATIO * file_bytes

    def charge(self, amount: int) -> bool:
        """Take ``amount`` bytes; False (nothing taken) when fewer are left."""
        if amount > self.left:
            return False
        self.left -= amount
        return True


@dataclass
class SstFile:
    """One SST file: its column family and range deletions, read when it is opened, and its
    entries, read a batch of data blocks at a time by :meth:`blocks` and :meth:`entries` (a
    subtask's files are read as streams, so memory holds a batch of each, not the state)."""

    name: str
    column_family: str
    format_version: int
    checksum: str
    #: "binary search" or "partitioned" (two-level: ForSt's default).
    index: str
    #: (start user key, end user key (exclusive), sequence) of each range deletion.
    range_deletions: list[tuple[bytes, bytes, int]] = field(default_factory=list, repr=False)
    #: An ingested file's sequence number, which every entry takes (None: entries carry their own).
    global_sequence: int | None = None
    _reader: _Reader | None = field(default=None, repr=False)
    _blocks: list[tuple[int, int]] = field(default_factory=list, repr=False)
    #: The data block entries the properties count (None: they do not say).
    _entries: int | None = field(default=None, repr=False)

    def entries(self) -> Iterator[tuple[bytes, int, int, bytes]]:
        """(user key, sequence, type, value) of every entry, in the file's order: ascending user
        key, newest (highest sequence) first; entries out of that order are corrupt, since the
        merge of a handle's files relies on it."""
        for block in self.blocks():
            yield from block.entries()

    def blocks(self, batch_blocks: int = BATCH_BLOCKS) -> Iterator[DataBlock]:
        """The data blocks' entries as columns, in the file's order, checked as :meth:`entries` says
        (``batch_blocks`` blocks at once when every check passes, else block by block); after the
        last, their count against the properties'."""
        reader = self._reader
        assert reader is not None
        previous: tuple[bytes, int] | None = None  # the last entry's (user key, -sequence)
        count = 0
        for first in range(0, len(self._blocks), batch_blocks):
            batch = self._blocks[first:first + batch_blocks]
            decoded = self._decoded(batch)
            whole = None if decoded is None else self._vector_checked(
                decoded[1].user_keys, decoded[1].trailers, decoded[1].values, previous)
            if whole is not None:  # the common case: the batch's entries at once
                previous = (whole.keys[-1].as_py(), -int(whole.sequences[-1]))
                count += len(whole.keys)
                yield whole
                continue
            for i, handle in enumerate(batch):
                block = None
                if decoded is None:
                    contents = reader.block(handle, "data")
                else:
                    contents, columns = decoded[0][i], decoded[1]
                    block = self._vector_checked(*columns.block(i), previous)
                    if block is None:  # read again entry by entry, charged again
                        reader.budget.left += int(columns.expanded[i])
                failure = None
                if block is None:
                    keys, values = reader.columns(contents, handle[0], "data")
                    block, failure = self._entry_checked(keys, values, previous, handle)
                if len(block.keys):
                    previous = (block.keys[-1].as_py(), -int(block.sequences[-1]))
                count += len(block.keys)
                yield block
                if failure is not None:
                    raise failure
        if self._entries is not None and count != self._entries:
            # A table builder counts what it writes: an index that leaves out a block names fewer.
            raise reader.corrupt(f"data blocks hold {count} entries, the properties count {self._entries}",
                                 *(self._blocks[-1] if self._blocks else (0, 0)))

    def _decoded(self, batch: list[tuple[int, int]]) -> tuple[list[bytes], BlockColumns] | None:
        """The contents of the data blocks at ``batch`` and their entries, decoded at once; None
        (nothing charged to the budget) when a block is unreadable or not of the plain layout, or
        the entry-by-entry read would have run out of budget (which it then names)."""
        reader = self._reader
        assert reader is not None
        budget = reader.budget.left
        contents, charged, limits, counts = [], [], [], []
        try:
            for handle in batch:
                before = reader.budget.left
                contents.append(reader.block(handle, "data"))
                charged.append(before - reader.budget.left)
                limit, count = reader.restart_points(contents[-1], handle[0], "data")
                limits.append(limit)
                counts.append(count)
        except SavepointError:
            reader.budget.left = budget
            return None
        decoded = decode_data_blocks(contents, limits, counts, budget)
        # The entry-by-entry read charges each block's decompressed size, then its keys, in turn.
        remaining = budget
        for size, expanded in zip(charged, [] if decoded is None else decoded.expanded.tolist()):
            if size > remaining or expanded > remaining - size:
                decoded = None
                break
            remaining -= size + expanded
        reader.budget.left = budget if decoded is None else remaining
        return None if decoded is None else (contents, decoded)

    def _vector_checked(self, user_keys: pa.BinaryArray, trailers: np.ndarray, values: pa.BinaryArray,
                        previous: tuple[bytes, int] | None) -> DataBlock | None:
        """The entries, if they pass every check at once and no user key repeats (the common
        case); None sends their blocks to :meth:`_entry_checked`, which finds the first failure."""
        if not len(user_keys):
            return None
        kinds = (trailers & 0xFF).astype(np.uint8)
        if self.global_sequence is None:
            sequences = (trailers >> 8).astype(np.int64)
        elif trailers[trailers > 0xFF].size:  # an ingested file's entry of its own sequence
            return None
        else:
            sequences = np.full(len(user_keys), self.global_sequence, np.int64)
        if not _DATA_KINDS[kinds].all() or not _strictly_ascending(user_keys):
            return None  # a kind not read, or keys not strictly ascending (a repeated key among them)
        if previous is not None and user_keys[0].as_py() <= previous[0]:
            return None
        return DataBlock(user_keys, sequences, kinds, values, True)

    def _entry_checked(self, keys: list[bytes], values: list[bytes], previous: tuple[bytes, int] | None,
                       handle: tuple[int, int]) -> tuple[DataBlock, SavepointError | None]:
        """The block, checked an entry at a time, and the first failure: the block then holds the
        entries before it (which a reader of entries gets before the error, as it always did)."""
        reader = self._reader
        assert reader is not None
        user_keys, sequences, kinds = [], [], []
        unique = True
        failure: SavepointError | None = None
        for key in keys:
            try:
                user_key, sequence, kind = _internal_key(reader, key, handle)
                if self.global_sequence is not None:
                    sequence = _globalised(reader, sequence, self.global_sequence, handle)
                if kind not in _ENTRY_TYPES:
                    raise reader.unsupported(f"holding a {_TYPE_NAMES.get(kind, f'type {kind}')} entry")
                order = (user_key, -sequence)
                if previous is not None and order <= previous:
                    raise reader.corrupt("data block entries out of the order of internal keys (ascending key, "
                                         "then descending sequence)", handle[0], handle[0] + handle[1])
            except SavepointError as err:
                failure = err
                break
            unique = unique and (previous is None or user_key != previous[0])
            previous = order
            user_keys.append(user_key)
            sequences.append(sequence)
            kinds.append(kind)
        block = DataBlock(pa.array(user_keys, pa.binary()), np.array(sequences, np.int64), np.array(kinds, np.uint8),
                          pa.array(values[:len(user_keys)], pa.binary()), unique)
        return block, failure


def _strictly_ascending(keys: pa.BinaryArray) -> bool:
    """Whether every key is bytewise greater than the one before it."""
    return len(keys) < 2 or bool(pc.all(pc.less(keys.slice(0, len(keys) - 1), keys.slice(1))).as_py())


@dataclass
class DataBlock:
    """The entries of one data block, or of a batch of them read at once, as columns, in the file's order."""

    keys: pa.BinaryArray  # user keys
    sequences: np.ndarray
    kinds: np.ndarray
    values: pa.BinaryArray
    #: No user key repeats within the entries nor the previous block's last one: every key is one entry.
    unique: bool

    def entries(self) -> Iterator[tuple[bytes, int, int, bytes]]:
        return zip(self.keys.to_pylist(), self.sequences.tolist(), self.kinds.tolist(), self.values.to_pylist())


class _Reader:
    def __init__(self, data: bytes | memoryview, name: str, budget: ExpansionBudget | None = None,
                 base: int = 0) -> None:
        self.data = data
        self.name = name
        self.base = base  # where data[0] is in the file name (a file merging's segment starts anywhere)
        self.checksum_type = 1
        self.context = 0  # base context checksum (format_version 6)
        self.budget = budget if budget is not None else ExpansionBudget(len(data))
        self._hasher: Callable[[bytes, bytes], int] | None = None

    def corrupt(self, reason: str, start: int, end: int) -> CorruptSavepointError:
        return CorruptSavepointError(f"SST file: {reason}", path=self.name,
                                     byte_range=(self.base + start, self.base + end))

    def unsupported(self, what: str) -> UnsupportedFormatError:
        return UnsupportedFormatError(f"SST file {what}, which pyref does not read; take a canonical savepoint "
                                      "(savepoint --type canonical) of the job and read that", path=self.name)

    # -- footer ------------------------------------------------------------

    def footer(self) -> tuple[int, tuple[int, int], tuple[int, int] | None]:
        """(format_version, metaindex handle, index handle or None: in the metaindex)."""
        size = len(self.data)
        if size < _LEGACY_FOOTER:
            raise self.corrupt(f"{size} bytes: too short for a table footer", 0, size)
        magic = _U64.unpack_from(self.data, size - 8)[0]
        if magic == LEGACY_MAGIC:
            start = size - _LEGACY_FOOTER
            metaindex, at = self.handle(self.data, start, size - 8, start)
            index, _ = self.handle(self.data, at, size - 8, start)
            return 0, metaindex, index
        if magic != BLOCK_BASED_MAGIC:
            raise self.corrupt(f"table magic number {magic:#x} is not a block-based table's", size - 8, size)
        if size < _FOOTER:
            raise self.corrupt(f"{size} bytes: too short for a table footer", 0, size)
        start = size - _FOOTER
        version = _U32.unpack_from(self.data, size - 12)[0]
        if not 1 <= version <= _MAX_FORMAT_VERSION:
            raise self.unsupported(f"of format_version {version} (pyref reads 0 to {_MAX_FORMAT_VERSION})")
        self.checksum_type = self.data[start]
        if self.checksum_type not in _CHECKSUMS:
            raise self.unsupported(f"with checksum type {self.checksum_type}")
        if version < 6:
            metaindex, at = self.handle(self.data, start + 1, size - 12, start)
            index, _ = self.handle(self.data, at, size - 12, start)
            return version, metaindex, index
        footer = bytes(self.data[start:size])
        if footer[1:5] != _EXTENDED_MAGIC:
            raise self.corrupt("format_version 6 footer without its extended magic", start + 1, start + 5)
        stored, self.context, metaindex_size = struct.unpack_from("<III", footer, 5)
        if self.context == 0:
            raise self.corrupt("format_version 6 footer with a zero base context checksum", start + 9, start + 13)
        if self.checksum_type:
            computed = (self.checksum_of(footer[:5] + bytes(4) + footer[9:]) + self.modifier(start)) & 0xFFFFFFFF
            if computed != stored:
                raise self.corrupt(f"footer checksum {stored:#010x}, computed {computed:#010x}", start, size)
        if footer[37:45] != bytes(8):
            raise self.unsupported("using a future format_version 6 feature (reserved footer bytes set)")
        metaindex_end = start - _TRAILER
        if metaindex_size > metaindex_end:
            raise self.corrupt(f"metaindex of {metaindex_size} bytes before a footer at {start}", start + 13,
                               start + 17)
        return version, (metaindex_end - metaindex_size, metaindex_size), None

    # -- blocks ------------------------------------------------------------

    def handle(self, buf: bytes | memoryview, at: int, stop: int, origin: int) -> tuple[tuple[int, int], int]:
        offset, at = self.varint(buf, at, stop, origin, 10)
        size, at = self.varint(buf, at, stop, origin, 10)
        return (offset, size), at

    def varint(self, buf: bytes | memoryview, at: int, stop: int, origin: int, limit: int = 5) -> tuple[int, int]:
        """A varint at ``buf[at]`` before ``stop``; ``origin`` is ``buf``'s offset in the file (for errors)."""
        value = shift = 0
        for i in range(limit):
            if at + i >= stop:
                break
            byte = buf[at + i]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, at + i + 1
            shift += 7
        raise self.corrupt("truncated or overlong varint", origin + at, origin + min(at + limit, stop))

    def modifier(self, offset: int) -> int:
        if not self.context:
            return 0
        return self.context ^ (((offset & 0xFFFFFFFF) + (offset >> 32)) & 0xFFFFFFFF)

    def checksum_of(self, data: bytes, last: bytes = b"") -> int:
        kind = self.checksum_type
        if kind == 1:
            crc = google_crc32c.extend(google_crc32c.value(data), last) if last else google_crc32c.value(data)
            return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
        if self._hasher is None:  # the checksum type is the footer's, read before any block
            self._hasher = _xxhash(self.name, _CHECKSUMS[kind])
        return self._hasher(data, last)

    def block(self, handle: tuple[int, int], what: str, written_after: bytes | None = None) -> bytes:
        """The (checked, uncompressed) contents of the block at ``handle``; ``written_after``: the
        tail of a key whose 8-byte value RocksDB may have overwritten after checksumming the block
        (as 0)."""
        offset, size = handle
        end = offset + size
        if end + _TRAILER > len(self.data) or size > MAX_BLOCK_BYTES:
            raise self.corrupt(f"{what} block handle ({offset}, {size}) is outside the file of {len(self.data)} "
                               "bytes", offset, end + _TRAILER)
        raw = bytes(self.data[offset:end])
        kind = self.data[end]
        if self.checksum_type:
            stored = _U32.unpack_from(self.data, end + 1)[0]
            computed = self.block_checksum(raw, kind, offset)
            if stored != computed and not (written_after and self.matches_zeroed(raw, kind, offset, stored,
                                                                                   written_after)):
                raise self.corrupt(f"{what} block checksum {stored:#010x}, computed {computed:#010x}", offset,
                                   end + _TRAILER)
        return self.decompress(raw, kind, offset, what)

    def block_checksum(self, raw: bytes, kind: int, offset: int) -> int:
        return (self.checksum_of(raw, bytes([kind])) + self.modifier(offset)) & 0xFFFFFFFF

    def matches_zeroed(self, raw: bytes, kind: int, offset: int, stored: int, key: bytes) -> bool:
        """Whether ``stored`` is the checksum of the block with the 8-byte value after ``key`` zeroed:
        ``key`` is a key's tail, which a block stores whole however much of the key it shares with
        the previous one, and right before the value; it must occur once."""
        at = raw.find(key)
        if at < 0 or raw.find(key, at + 1) >= 0 or at + len(key) + 8 > len(raw):
            return False
        at += len(key)
        return stored == self.block_checksum(raw[:at] + bytes(8) + raw[at + 8:], kind, offset)

    def decompress(self, raw: bytes, kind: int, offset: int, what: str) -> bytes:
        if kind == 0:
            return raw
        if kind not in (1, 4, 5, 7):
            raise self.unsupported(f"with {_COMPRESSION.get(kind, f'unknown ({kind})')} compressed blocks "
                                   "(pyref reads none, snappy, lz4 and zstd)")
        # snappy's own header, or RocksDB's varint32 prefix (compress_format_version 2), says the size.
        expected, at = self.varint(raw, 0, len(raw), offset)
        if expected > min(MAX_BLOCK_BYTES, _MAX_RATIO[kind] * len(raw)) or not self.budget.charge(expected):
            raise self.corrupt(f"{what} block of {len(raw)} stored bytes declares {expected} uncompressed bytes "
                               f"({_COMPRESSION[kind]} expands at most {_MAX_RATIO[kind]} times; at most "
                               f"{MAX_BLOCK_BYTES} a block)", offset, offset + at)
        # Into a buffer of exactly the declared size: cramjam's one-shot calls pad a short output with zeros.
        out = bytearray(expected)
        try:
            if kind == 1:
                written = cramjam.snappy.decompress_raw_into(raw, out)
            elif kind == 7:
                written = cramjam.zstd.decompress_into(raw[at:], out)
            else:
                # With its size before it (4 bytes, little-endian): cramjam 2.7, the floor, reads only
                # that form; 2.14 reads both.
                written = cramjam.lz4.decompress_block_into(_U32.pack(expected) + raw[at:], out)
        except Exception as exc:  # cramjam raises its own DecompressionError
            raise self.corrupt(f"{what} block does not decompress ({_COMPRESSION[kind]}) to its {expected} bytes: "
                               f"{exc}", offset, offset + len(raw)) from None
        if written != expected:
            raise self.corrupt(f"{what} block decompresses to {written} bytes, not {expected}", offset,
                               offset + len(raw))
        return bytes(out)

    def restart_points(self, block: bytes, offset: int, what: str) -> tuple[int, int]:
        """(where the entries of a block at file ``offset`` end, the number of restart points)."""
        n = len(block)
        if n < 4:
            raise self.corrupt(f"{what} block of {n} bytes has no restart count", offset, offset + n)
        packed = _U32.unpack_from(block, n - 4)[0]
        if packed & _OTHER_FOOTER_BITS:
            raise self.unsupported(f"with a {what} block layout newer than RocksDB 9 (footer bits {packed:#x})")
        restarts = packed & ~_HASH_INDEX_BIT
        limit = n - 4
        if packed & _HASH_INDEX_BIT:
            if limit < 2:
                raise self.corrupt(f"{what} block too short for its hash index", offset, offset + n)
            limit -= 2 + struct.unpack_from("<H", block, limit - 2)[0]
        limit -= 4 * restarts
        if restarts == 0 or limit < 0:
            raise self.corrupt(f"{what} block of {n} bytes says {restarts} restart points", offset + n - 4, offset + n)
        return limit, restarts

    def columns(self, block: bytes, offset: int, what: str,
                delta_values: bool = False) -> tuple[list[bytes], list[bytes]]:
        """The keys and the values of every entry of a block at file ``offset``; with ``delta_values``
        (an index block) each value is its block handle re-encoded as (offset varint64, size varint64)."""
        limit, _ = self.restart_points(block, offset, what)
        keys: list[bytes] = []
        values: list[bytes] = []
        key = b""
        previous: tuple[int, int] | None = None
        varint_at = self.varint
        expanded = 0  # key bytes made so far, charged to the budget once per block
        at = 0
        while at < limit:
            start = at
            # Three varints; nearly always one byte each, read inline (this loop is the reader's hot path).
            shared = block[at]
            if shared < 0x80 and at + 1 < limit and block[at + 1] < 0x80:
                unshared = block[at + 1]
                at += 2
            else:
                shared, at = varint_at(block, at, limit, offset)
                unshared, at = varint_at(block, at, limit, offset)
            if not delta_values:
                if at < limit and block[at] < 0x80:
                    length = block[at]
                    at += 1
                else:
                    length, at = varint_at(block, at, limit, offset)
            if shared > len(key) or at + unshared > limit:
                raise self.corrupt(f"{what} block entry shares {shared} of {len(key)} key bytes and adds {unshared}",
                                   offset + start, offset + at)
            key = key[:shared] + block[at:at + unshared]
            at += unshared
            expanded += len(key)
            if expanded > self.budget.left:  # prefix compression lets a hostile block repeat a long key cheaply
                raise self.corrupt(f"{what} block keys expand beyond 64 MiB and {EXPANSION_RATIO} times the files' size",
                                   offset + start, offset + at)
            if delta_values:
                if shared and previous is not None:
                    delta, at = varint_at(block, at, limit, offset, 10)
                    delta = (delta >> 1) ^ -(delta & 1)  # zigzag
                    handle = (previous[0] + previous[1] + _TRAILER, previous[1] + delta)
                    if handle[1] < 0:
                        raise self.corrupt(f"{what} block entry's size delta {delta} makes a block of "
                                           f"{handle[1]} bytes", offset + start, offset + at)
                else:
                    handle, at = self.handle(block, at, limit, offset)
                previous = handle
                value = varint(handle[0]) + varint(handle[1])  # as a full handle is stored
            else:
                if at + length > limit:
                    raise self.corrupt(f"{what} block entry value of {length} bytes overruns the block",
                                       offset + start, offset + at)
                value = block[at:at + length]
                at += length
            keys.append(key)
            values.append(value)
        self.budget.charge(expanded)
        return keys, values


def _xxhash(name: str, kind: str) -> Callable[[bytes, bytes], int]:
    try:
        import xxhash
    except ImportError:
        raise UnsupportedFormatError(f"SST file with {kind} block checksums: install the xxhash package to read "
                                     "it", path=name) from None
    if kind == "xxhash":
        return lambda data, last: xxhash.xxh32_intdigest(data + last)
    if kind == "xxhash64":
        return lambda data, last: xxhash.xxh64_intdigest(data + last) & 0xFFFFFFFF
    # XXH3 of all but the last byte, which is mixed in separately (ModifyChecksumForLastByte);
    # a block's last byte is its type byte (``last``): the block itself is hashed uncopied.
    def xxh3(data: bytes, last: bytes) -> int:
        if not last:
            if not data:
                return 0
            data, last = data[:-1], data[-1:]
        hasher = xxhash.xxh3_64(data)
        hasher.update(last[:-1])
        return ((hasher.intdigest() & 0xFFFFFFFF) ^ (last[-1] * 0x6B9083D9)) & 0xFFFFFFFF
    return xxh3


EXTERNAL_VERSION = b"rocksdb.external_sst_file.version"
GLOBAL_SEQNO = b"rocksdb.external_sst_file.global_seqno"


def _properties(reader: _Reader, metaindex: dict[bytes, bytes],
                origin: int) -> tuple[dict[bytes, bytes], tuple[int, int]]:
    """The properties and the (start, end) in the file of their block."""
    raw = metaindex.get(b"rocksdb.properties")
    if raw is None:
        raise reader.corrupt("no properties block (the column family is named there)", origin, origin)
    handle, _ = reader.handle(raw, 0, len(raw), origin)
    # RocksDB writes an ingested file's global sequence number into the block in place, keeping the
    # checksum of the block as SstFileWriter wrote it: with the number 0 (write_global_seqno).
    block = reader.block(handle, "properties", written_after=GLOBAL_SEQNO[GLOBAL_SEQNO.rindex(b".") + 1:])
    return dict(zip(*reader.columns(block, handle[0], "properties"))), (handle[0], handle[0] + handle[1])


def global_sequence(props: dict[bytes, bytes], name: str, block: tuple[int, int]) -> int | None:
    """The sequence number every entry of an ingested SST file takes, from its properties
    (``block``: the properties block's (start, end), for errors); None for a file the database
    wrote itself, whose entries carry their own. RocksDB's rule (``GetGlobalSequenceNumber``):
    only version 2 files have one, the uint64 LE ``global_seqno`` property when non-zero, else
    the file's largest sequence in the ``MANIFEST``, which pyref does not read: refused."""
    version_bytes = props.get(EXTERNAL_VERSION)
    stored = props.get(GLOBAL_SEQNO)
    if version_bytes is None:
        if stored is not None:
            raise CorruptSavepointError("SST file: a global sequence number property in a file not ingested "
                                        "from outside (no rocksdb.external_sst_file.version)", path=name,
                                        byte_range=block)
        return None
    if len(version_bytes) != 4 or (stored is not None and len(stored) != 8):
        raise CorruptSavepointError(f"SST file: external file properties of {len(version_bytes)} and "
                                    f"{len(stored or b'')} bytes (uint32 version, uint64 global sequence)",
                                    path=name, byte_range=block)
    version = _U32.unpack(version_bytes)[0]
    remedy = ("which pyref cannot order against the database's other files; take a canonical savepoint "
              "(savepoint --type canonical) of the job and read that")
    if version != 2:
        raise UnsupportedFormatError(f"SST file ingested from outside (external SST file version {version}: its "
                                     f"entries' order among the other files' is the database's), {remedy}",
                                     path=name)
    sequence = _U64.unpack(stored)[0] if stored is not None else 0
    if sequence == 0:
        raise UnsupportedFormatError("SST file ingested from outside whose global sequence number is only in "
                                     f"RocksDB's MANIFEST (rocksdb.external_sst_file.global_seqno 0), {remedy}",
                                     path=name)
    if sequence >= 1 << 56:
        raise CorruptSavepointError(f"SST file: global sequence number {sequence} beyond RocksDB's 56 bits",
                                    path=name, byte_range=block)
    return sequence


def open_sst(data: bytes | memoryview, name: str, budget: ExpansionBudget | None = None, base: int = 0) -> SstFile:
    """The SST file ``data`` (named ``name`` in errors, its bytes at ``base`` of that file): footer,
    properties, index and range deletions read and checked; its entries are read by
    :meth:`SstFile.entries`. ``budget``: shared with the other files of a read (None: the file's own)."""
    reader = _Reader(data, name, budget, base)
    version, metaindex_handle, index_handle = reader.footer()
    metaindex = dict(zip(*reader.columns(reader.block(metaindex_handle, "metaindex"), metaindex_handle[0],
                                         "metaindex")))
    props, properties_block = _properties(reader, metaindex, metaindex_handle[0])
    comparator = props.get(b"rocksdb.comparator", b"").decode("utf-8", "replace")
    if comparator not in ("leveldb.BytewiseComparator", "rocksdb.BytewiseComparator"):
        raise reader.unsupported(f"ordered by the comparator {comparator!r}, not the bytewise one Flink uses")
    ingested = global_sequence(props, name, (base + properties_block[0], base + properties_block[1]))
    index_type = props.get(b"rocksdb.block.based.table.index.type", bytes(4))
    kind = _U32.unpack_from(index_type.ljust(4, b"\0"))[0]
    if kind not in (BINARY_SEARCH_INDEX, PARTITIONED_INDEX):
        raise reader.unsupported(f"with a {_INDEX_TYPES.get(kind, f'unknown ({kind})')} index")
    if index_handle is None:
        raw = metaindex.get(b"rocksdb.index")
        if raw is None:
            raise reader.corrupt("format_version 6 metaindex names no index block", metaindex_handle[0],
                                 sum(metaindex_handle))
        index_handle, _ = reader.handle(raw, 0, len(raw), metaindex_handle[0])
    delta = props.get(b"rocksdb.index.value.is.delta.encoded", b"\0") != b"\0"
    name_bytes = props.get(b"rocksdb.column.family.name")
    if name_bytes is None and ingested is not None:  # SstFileWriter without a column family handle
        raise reader.unsupported("ingested from outside naming no column family (the MANIFEST says which "
                                 "state it holds)")
    if name_bytes is None:
        raise reader.corrupt("properties name no column family", metaindex_handle[0], sum(metaindex_handle))
    table = SstFile(name, name_bytes.decode("utf-8", "replace"), version, _CHECKSUMS[reader.checksum_type],
                    "partitioned" if kind == PARTITIONED_INDEX else "binary search", global_sequence=ingested,
                    _reader=reader)
    # Data blocks and index partitions do not overlap: an index naming more bytes than the file has
    # (one block over and over, say) is corrupt, and the work stays bounded by the file's size.
    stored = 0
    partitions = [index_handle]
    if kind == PARTITIONED_INDEX:
        partitions = _indexed_blocks(reader, index_handle, "top-level index", delta)
        stored = sum(handle[1] + _TRAILER for handle in partitions)
        if stored > len(data):
            raise reader.corrupt(f"top-level index names more index partition bytes than the file's {len(data)}",
                                 *index_handle)
        counted = _counted(reader, props, b"rocksdb.index.partitions", properties_block)
        if counted is not None and counted != len(partitions):
            raise reader.corrupt(f"top-level index names {len(partitions)} index partitions, the properties "
                                 f"count {counted}", index_handle[0], sum(index_handle))
    for partition in partitions:
        for handle in _indexed_blocks(reader, partition, "index", delta):
            stored += handle[1] + _TRAILER
            if stored > len(data):
                raise reader.corrupt(f"index names more data block bytes than the file's {len(data)}", *handle)
            table._blocks.append(handle)
    blocks = _counted(reader, props, b"rocksdb.num.data.blocks", properties_block)
    if blocks is not None and blocks != len(table._blocks):
        raise reader.corrupt(f"index names {len(table._blocks)} data blocks, the properties count {blocks}",
                             index_handle[0], sum(index_handle))
    range_del = metaindex.get(b"rocksdb.range_del")
    if range_del is not None:
        handle, _ = reader.handle(range_del, 0, len(range_del), metaindex_handle[0])
        for key, end in zip(*reader.columns(reader.block(handle, "range deletion"), handle[0], "range deletion")):
            user_key, sequence, kind = _internal_key(reader, key, handle)
            if kind != RANGE_DELETION:
                raise reader.corrupt(f"range deletion block entry of type {kind}", *handle)
            if ingested is not None:
                sequence = _globalised(reader, sequence, ingested, handle)
            table.range_deletions.append((user_key, end, sequence))
    deletions = _counted(reader, props, b"rocksdb.num.range-deletions", properties_block)
    if deletions is not None and deletions != len(table.range_deletions):
        raise reader.corrupt(f"{len(table.range_deletions)} range deletions, the properties count {deletions}",
                             *properties_block)
    entries = _counted(reader, props, b"rocksdb.num.entries", properties_block)  # range deletions included
    if entries is not None:
        table._entries = entries - len(table.range_deletions)
    return table


def _indexed_blocks(reader: _Reader, index: tuple[int, int], what: str, delta: bool) -> list[tuple[int, int]]:
    """The block handles an index block at ``index`` holds, in its order (its keys, separators, are not needed)."""
    values = reader.columns(reader.block(index, what), index[0], what, delta)[1]
    return [reader.handle(value, 0, len(value), index[0])[0] for value in values]


def _counted(reader: _Reader, props: dict[bytes, bytes], name: bytes, block: tuple[int, int]) -> int | None:
    """A count the properties hold (a varint64), or None when they do not."""
    raw = props.get(name)
    if raw is None:
        return None
    value, end = reader.varint(raw, 0, len(raw), block[0], 10)
    if end != len(raw):
        raise reader.corrupt(f"property {name.decode()} of {len(raw)} bytes is not one varint", *block)
    return value


def _internal_key(reader: _Reader, key: bytes, handle: tuple[int, int]) -> tuple[bytes, int, int]:
    if len(key) < 8:
        raise reader.corrupt(f"internal key of {len(key)} bytes (at least 8: sequence and type)", handle[0],
                             handle[0] + handle[1])
    trailer = int.from_bytes(key[-8:], "little")
    return key[:-8], trailer >> 8, trailer & 0xFF


def _globalised(reader: _Reader, sequence: int, global_seqno: int, handle: tuple[int, int]) -> int:
    """An ingested file's entry's sequence: the file's global one; RocksDB's writer stores 0."""
    if sequence != 0:
        raise reader.corrupt(f"ingested file's entry of sequence {sequence} (an external file stores 0; the "
                             f"file's global sequence is {global_seqno})", handle[0], handle[0] + handle[1])
    return global_seqno
