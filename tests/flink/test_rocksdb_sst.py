"""RocksDB SST files of real Flink checkpoints (tests/flink/data/checkpoints) read by
pyref.flink.rocksdb: hostile or damaged bytes give typed errors naming the file and the byte
range, and the merge of a handle's files follows RocksDB's rules."""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import struct
import tracemalloc
from collections.abc import Callable

import cramjam
import google_crc32c
import numpy as np
import pyarrow as pa
import pytest

from pyref.errors import CorruptSavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint
from pyref.flink.dataoutput import varint
from pyref.flink.handles import IncrementalHandle
from pyref.flink.rocksdb import native
from pyref.flink.rocksdb.native import live_rows, sst_files
from pyref.flink.rocksdb.sst import (BLOCK_BASED_MAGIC, DELETION, EXTERNAL_VERSION, GLOBAL_SEQNO, MERGE,
                                     SINGLE_DELETION, VALUE, DataBlock, ExpansionBudget, SstFile, _properties, _Reader,
                                     global_sequence, open_sst)

from compat_tests.flink.checkpoints import committed_snapshot

DATA = pathlib.Path(__file__).resolve().parent / "data" / "checkpoints"
#: A RocksDB database with a file ingested from outside (tests/flink/data/rocksdb-external/README.md).
EXTERNAL = DATA.parent / "rocksdb-external"
NAME = "000010.sst"


def _inline_sst() -> bytes:
    """An SST file inline in the 1.16.3 full checkpoint's _metadata (format_version 5, crc32c)."""
    with FlinkSavepoint.open(DATA / "1.16.3-rocksdb-full-seeds" / "checkpoint") as sp:
        handle = sp.operators[2].state.subtasks[0].managed_keyed_state
        assert isinstance(handle, IncrementalHandle)
        data = sst_files(handle)[0][1].data
        assert data is not None
        return data


def _shared_sst() -> bytes:
    """An SST file of the 2.3.0 incremental checkpoint's shared directory (XXH3 checksums)."""
    return min((DATA / "2.3.0-rocksdb-incremental-churn" / "shared").iterdir()).read_bytes()


def read_sst(data: bytes, name: str) -> list[tuple[bytes, int, int, bytes]]:
    """Every entry of an SST file (opening it checks footer, properties and index; the
    entries are read block by block)."""
    return list(open_sst(data, name).entries())


def _handles(data: bytes) -> tuple[tuple[int, int], tuple[int, int]]:
    """The metaindex and index handles of a format_version 5 footer."""
    _, metaindex, index = _Reader(data, NAME).footer()
    assert index is not None
    return metaindex, index


def _with_footer(data: bytes, metaindex: tuple[int, int], index: tuple[int, int]) -> bytes:
    handles = varint(metaindex[0]) + varint(metaindex[1]) + varint(index[0]) + varint(index[1])
    return data[:-53] + data[-53:-52] + handles.ljust(40, b"\0") + data[-12:]


def _resealed(data: bytes, offset: int, contents: bytes) -> bytes:
    """``data`` with the block at ``offset`` replaced by ``contents`` (same size), checksummed anew."""
    kind = data[offset + len(contents):offset + len(contents) + 1]
    crc = google_crc32c.value(contents + kind)
    masked = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    return data[:offset] + contents + kind + struct.pack("<I", masked) + data[offset + len(contents) + 5:]


def test_real_files_read_with_both_checksums() -> None:
    inline = open_sst(_inline_sst(), NAME)
    assert (inline.column_family, inline.format_version, inline.checksum) == ("count", 5, "crc32c")
    entries = list(inline.entries())
    assert entries and {kind for _, _, kind, _ in entries} == {VALUE}
    shared = open_sst(_shared_sst(), NAME)
    assert shared.checksum == "XXH3" and shared.column_family in ("latest", "log", "seen")
    assert list(shared.entries())


@pytest.mark.parametrize("cut", [1, 10, 53, 200])
def test_truncated_files_are_corrupt(cut: int) -> None:
    data = _inline_sst()
    with pytest.raises(CorruptSavepointError) as err:
        read_sst(data[:-cut], NAME)
    assert err.value.path == NAME and err.value.byte_range is not None


def test_a_flipped_byte_fails_its_block_checksum() -> None:
    data = bytearray(_inline_sst())
    data[3] ^= 0x40  # in the first data block
    with pytest.raises(CorruptSavepointError, match="data block checksum") as err:
        read_sst(bytes(data), NAME)
    assert err.value.byte_range is not None and err.value.byte_range[0] == 0


def test_an_xxh3_checksum_is_checked_too() -> None:
    data = bytearray(_shared_sst())
    data[3] ^= 0x40
    with pytest.raises(CorruptSavepointError, match="block checksum"):
        read_sst(bytes(data), NAME)


def test_a_block_handle_outside_the_file_is_corrupt() -> None:
    data = _inline_sst()
    metaindex, index = _handles(data)
    with pytest.raises(CorruptSavepointError, match=r"metaindex block handle \(1000000000, 33\) is outside") as err:
        read_sst(_with_footer(data, (10**9, metaindex[1]), index), NAME)
    assert err.value.byte_range == (10**9, 10**9 + 33 + 5)


def test_a_huge_restart_count_is_corrupt_not_allocated() -> None:
    data = _inline_sst()
    _, (offset, size) = _handles(data)
    block = data[offset:offset + size]
    with pytest.raises(CorruptSavepointError, match="index block of .* says 268435455 restart points"):
        read_sst(_resealed(data, offset, block[:-4] + struct.pack("<I", 0x0FFFFFFF)), NAME)


def test_an_index_naming_one_block_over_and_over_is_corrupt() -> None:
    data = _inline_sst()
    metaindex, (offset, size) = _handles(data)
    block = data[offset:offset + size]
    assert struct.unpack_from("<I", block, size - 4)[0] == 1  # one entry, one restart point
    entry = block[:-8]
    # The same entry 40 times, each its own restart point, in a new index block before the footer.
    forged = entry * 40 + b"".join(struct.pack("<I", i * len(entry)) for i in range(40)) + struct.pack("<I", 40)
    at = len(data) - 53
    grown = data[:at] + forged + bytes(5) + data[at:]
    with pytest.raises(CorruptSavepointError, match="more data block bytes than the file"):
        read_sst(_with_footer(_resealed(grown, at, forged), metaindex, (at, len(forged))), NAME)


def test_another_comparator_is_refused_by_name() -> None:
    data = _inline_sst()
    reader = _Reader(data, NAME)
    _, metaindex, _ = reader.footer()
    entries = dict(zip(*reader.columns(reader.block(metaindex, "metaindex"), metaindex[0], "metaindex")))
    (offset, size), _ = reader.handle(entries[b"rocksdb.properties"], 0, 10, 0)
    contents = data[offset:offset + size].replace(b"leveldb.BytewiseComparator", b"leveldb.ReverseComparatorX")
    with pytest.raises(UnsupportedFormatError, match="comparator 'leveldb.ReverseComparatorX'"):
        read_sst(_resealed(data, offset, contents), NAME)


@dataclasses.dataclass
class Entries:
    """Hand-built entries of one column family's file, in internal-key order (what an SstFile yields)."""

    rows: list[tuple[bytes, int, int, bytes]]
    range_deletions: list[tuple[bytes, bytes, int]] = dataclasses.field(default_factory=list)
    column_family: str = "s"

    def entries(self):
        return iter(self.rows)

    def blocks(self, batch_blocks: int = 1):
        """The rows as one data block, as SstFile.blocks gives them."""
        keys = [k for k, _, _, _ in self.rows]
        yield DataBlock(pa.array(keys, pa.binary()), np.array([s for _, s, _, _ in self.rows], np.int64),
                        np.array([t for _, _, t, _ in self.rows], np.uint8),
                        pa.array([v for _, _, _, v in self.rows], pa.binary()), len(set(keys)) == len(keys))


def _listed(rows):
    """live_rows' (key group, keys, values) with the arrays as lists of bytes."""
    return [(group, keys.to_pylist(), values.to_pylist()) for group, keys, values in rows]


@pytest.mark.parametrize("by_group", [True, False])
def test_merge_follows_rocksdbs_rules(by_group: bool) -> None:
    """Newest first: a value ends the walk, a deletion hides older entries, merge operands join
    oldest first after their base with ','; a range deletion hides older entries; keys of other
    key groups are dropped."""
    older = Entries([(b"\x01a", 1, VALUE, b"a1"), (b"\x01b", 2, VALUE, b"b1"), (b"\x01c", 3, VALUE, b"c1"),
                     (b"\x01d", 4, VALUE, b"d1"), (b"\x05x", 5, VALUE, b"x1")])
    newer = Entries([(b"\x01a", 11, MERGE, b"a3"), (b"\x01a", 10, MERGE, b"a2"), (b"\x01b", 12, DELETION, b""),
                     (b"\x01c", 13, VALUE, b"c2"), (b"\x01e", 15, MERGE, b"e2"), (b"\x01e", 14, MERGE, b"e1")],
                    [(b"\x01d", b"\x01e", 9)])
    (group, keys, values), = _listed(live_rows([older, newer], range(0, 4), 1, "test", by_group))  # 5's x is dropped
    assert dict(zip(keys, values)) == {b"\x01a": b"a1,a2,a3", b"\x01c": b"c2", b"\x01e": b"e1,e2"} and group == 1


@pytest.mark.parametrize("by_group", [True, False])
def test_key_groups_resolved_as_columns_read_as_the_merge(by_group: bool) -> None:
    """Key group 1: keys in one file each (a deletion alone hides nothing, one append is the value);
    2: values over values of an older file; 3: an append over a value (merged entry by entry);
    4: files of overlapping sequence ranges (merged entry by entry)."""
    older = Entries([(b"\x01a", 1, VALUE, b"a1"), (b"\x01c", 2, MERGE, b"c1"), (b"\x02a", 3, VALUE, b"2a1"),
                     (b"\x02b", 4, VALUE, b"2b1"), (b"\x03a", 5, VALUE, b"3a1"), (b"\x04a", 20, VALUE, b"4a1")])
    newer = Entries([(b"\x01b", 11, VALUE, b"b2"), (b"\x01d", 12, DELETION, b""), (b"\x02b", 13, VALUE, b"2b2"),
                     (b"\x02c", 14, VALUE, b"2c2"), (b"\x03a", 15, MERGE, b"3a2"), (b"\x04a", 16, VALUE, b"4a2")])
    rows = [(g, list(zip(k, v))) for g, k, v in _listed(live_rows([older, newer], range(0, 8), 1, "test", by_group))]
    assert rows == [(1, [(b"\x01a", b"a1"), (b"\x01b", b"b2"), (b"\x01c", b"c1")]),
                    (2, [(b"\x02a", b"2a1"), (b"\x02b", b"2b2"), (b"\x02c", b"2c2")]),
                    (3, [(b"\x03a", b"3a1,3a2")]), (4, [(b"\x04a", b"4a1")])]


def test_a_live_key_shorter_than_the_key_group_prefix_is_corrupt_either_way() -> None:
    short = Entries([(b"\x01", 1, VALUE, b"v"), (b"\x01\x00a", 2, VALUE, b"w")])
    for by_group in (True, False):
        with pytest.raises(CorruptSavepointError, match="key of 1 bytes, shorter than its 2-byte"):
            list(live_rows([short], range(0, 1 << 16), 2, "test", by_group))
    deleted = Entries([(b"\x01", 1, DELETION, b""), (b"\x01\x00a", 2, VALUE, b"w")])
    assert [_listed(live_rows([deleted], range(0, 1 << 16), 2, "test", by_group)) for by_group in (True, False)] == [
        [(256, [b"\x01\x00a"], [b"w"])]] * 2


def test_entries_out_of_internal_key_order_are_corrupt() -> None:
    """The merge relies on each file's order: a file whose data block breaks it is corrupt."""
    data = _inline_sst()
    (offset, size), = open_sst(data, NAME)._blocks
    block = data[offset:offset + size]
    # Snappy: the uncompressed size (varint b7 05), then a literal of 17 bytes (tag 0x40) that starts
    # the block: shared 0, unshared 19, value length 8, then the first key, its key group first.
    assert block[:3] == bytes.fromhex("b70540") and block[3:6] == bytes.fromhex("001308")
    forged = block[:6] + b"\xff" + block[7:]  # the first key's key-group byte: now above every later key
    with pytest.raises(CorruptSavepointError, match="out of the order") as err:
        list(open_sst(_resealed(data, offset, forged), NAME).entries())
    assert err.value.path == NAME and err.value.byte_range == (offset, offset + size)


def test_a_subtask_reads_in_runs_of_whole_key_groups() -> None:
    """batch_bytes bounds what a run holds: the runs add up to the one-run read, each key group in one run."""
    with FlinkSavepoint.open(DATA / "1.16.3-rocksdb-full-seeds" / "checkpoint") as sp:
        op = next(o for o in sp.operators if any(isinstance(s.managed_keyed_state, IncrementalHandle)
                                                 for s in o.state.subtasks))
        whole = list(op.keyed_subtasks())
        runs = list(op.keyed_subtasks(batch_bytes=64))
    assert len(runs) > len(whole)
    for name in whole[0].states:
        one = [(int(g), k) for w in whole for g, k in zip(w.states[name][1].key_groups, w.states[name][1].keys.to_pylist())]
        many = [(int(g), k) for r in runs for g, k in zip(r.states[name][1].key_groups, r.states[name][1].keys.to_pylist())]
        assert many == one
    seen: set[int] = set()
    for r in runs:
        groups = {int(g) for _, rows in r.states.values() for g in rows.key_groups}
        assert not groups & seen
        seen |= groups


# -- files ingested from outside (SstFileWriter, ingestExternalFile): real RocksDB bytes -----------

def _block(entries: dict[bytes, bytes]) -> bytes:
    """A block of ``entries`` (sorted), each its own restart point."""
    body = b""
    restarts = []
    for key, value in sorted(entries.items()):
        restarts.append(len(body))
        body += varint(0) + varint(len(key)) + varint(len(value)) + key + value
    return body + b"".join(struct.pack("<I", r) for r in restarts) + struct.pack("<I", len(restarts))


def _with_column_family(data: bytes, family: bytes) -> bytes:
    """``data`` (format_version 5) with its properties block rebuilt naming ``family``, appended with a new
    metaindex before the footer: RocksJava's SstFileWriter names none, RocksDB's C++ one can."""
    props, _ = _external_props(data)
    reader = _Reader(data, NAME)
    _, _, index = reader.footer()
    assert index is not None
    out = data[:-53]
    def sealed(contents: bytes) -> tuple[int, int]:
        nonlocal out
        at = len(out)
        out += contents + b"\0" + struct.pack("<I", reader.block_checksum(contents, 0, at))
        return at, len(contents)
    at, size = sealed(_block({**props, b"rocksdb.column.family.name": family}))
    new_metaindex = sealed(_block({b"rocksdb.properties": varint(at) + varint(size)}))
    return _with_footer(out + data[-53:], new_metaindex, index)


def _external_props(data: bytes) -> tuple[dict[bytes, bytes], tuple[int, int]]:
    """An SST file's properties and their block's (start, end)."""
    reader = _Reader(data, NAME)
    _, metaindex, _ = reader.footer()
    return _properties(reader, dict(zip(*reader.columns(reader.block(metaindex, "m"), metaindex[0], "m"))), metaindex[0])


def test_an_ingested_files_entries_take_its_global_sequence_number_as_rocksdb_reads_them() -> None:
    """RocksDB wrote the ingested file's global sequence number (4: it overlaps keys of sequences 1..3)
    into its properties after checksumming them with 0 there; every entry stores 0 and takes 4, so
    the file merges between the older flush and the newer one exactly as RocksDB's iterator read."""
    props, block = _external_props((EXTERNAL / "written/000010.sst").read_bytes())
    assert props[EXTERNAL_VERSION] == struct.pack("<I", 2) and global_sequence(props, NAME, block) == 4
    with pytest.raises(UnsupportedFormatError, match="ingested from outside naming no column family"):
        open_sst((EXTERNAL / "written/000010.sst").read_bytes(), "000010.sst")
    ingested = open_sst(_with_column_family((EXTERNAL / "written/000010.sst").read_bytes(), b"default"), NAME)
    assert ingested.global_sequence == 4 and {seq for _, seq, _, _ in ingested.entries()} == {4}
    files = [open_sst((EXTERNAL / "written" / n).read_bytes(), n) for n in ("000009.sst", "000012.sst")]
    assert [f.column_family for f in files] == ["default", "default"]
    (_, keys, values), = _listed(live_rows([files[0], ingested, files[1]], range(256), 1, "test"))
    truth = [line.split("\t") for line in (EXTERNAL / "written/truth.txt").read_text().splitlines()]
    assert [(k.hex(), v.hex()) for k, v in zip(keys, values)] == [(k, v) for k, v in truth]


def test_the_checksum_of_a_written_back_properties_block_still_covers_all_else() -> None:
    """Only the 8 bytes after the global sequence number's key are taken as 0: any other flipped byte fails."""
    data = bytearray((EXTERNAL / "written/000010.sst").read_bytes())
    _, (start, end) = _external_props(bytes(data))
    data[start + 5] ^= 0x01  # in the first property's key
    with pytest.raises(CorruptSavepointError, match="properties block checksum") as err:
        open_sst(bytes(data), NAME)
    assert err.value.byte_range == (start, end + 5)


def test_an_ingested_file_whose_sequence_number_only_the_manifest_holds_is_refused_by_name() -> None:
    props, block = _external_props((EXTERNAL / "manifest-only/000010.sst").read_bytes())
    assert props[GLOBAL_SEQNO] == bytes(8)
    with pytest.raises(UnsupportedFormatError, match="global sequence number is only in RocksDB's MANIFEST") as err:
        open_sst(_with_column_family((EXTERNAL / "manifest-only/000010.sst").read_bytes(), b"default"), NAME)
    assert err.value.path == NAME


@pytest.mark.parametrize(("props", "error", "match"), [
    ({}, None, None),  # a table the database wrote: its entries carry their own sequence numbers
    ({EXTERNAL_VERSION: struct.pack("<I", 2), GLOBAL_SEQNO: struct.pack("<Q", 7)}, None, None),
    ({EXTERNAL_VERSION: struct.pack("<I", 2)}, UnsupportedFormatError, "only in RocksDB's MANIFEST"),
    ({EXTERNAL_VERSION: struct.pack("<I", 1)}, UnsupportedFormatError, "external SST file version 1"),
    ({GLOBAL_SEQNO: struct.pack("<Q", 7)}, CorruptSavepointError, "not ingested from outside"),
    ({EXTERNAL_VERSION: b"\2", GLOBAL_SEQNO: struct.pack("<Q", 7)}, CorruptSavepointError, "uint32 version"),
    ({EXTERNAL_VERSION: struct.pack("<I", 2), GLOBAL_SEQNO: struct.pack("<Q", 1 << 56)}, CorruptSavepointError,
     "beyond RocksDB's 56 bits"),
])
def test_global_sequence_number_rules(props: dict[bytes, bytes], error: type[Exception] | None,
                                      match: str | None) -> None:
    """RocksDB's GetGlobalSequenceNumber: only a version 2 file has one, its non-zero property, else
    the MANIFEST's (refused); the property without a version, or of the wrong width, is corrupt."""
    if error is None:
        assert global_sequence(props, NAME, (0, 10)) == (7 if props else None)
        return
    with pytest.raises(error, match=match) as err:
        global_sequence(props, NAME, (0, 10))
    assert err.value.path == NAME and (error is UnsupportedFormatError or err.value.byte_range == (0, 10))


def test_an_ingested_files_entry_of_its_own_sequence_is_corrupt() -> None:
    """An external file's writer stores sequence 0 in every key: another number is corrupt, not reordered."""
    data = _with_column_family((EXTERNAL / "written/000010.sst").read_bytes(), b"default")
    (offset, size), = open_sst(data, NAME)._blocks
    block = data[offset:offset + size]
    trailer = (0 << 8 | VALUE).to_bytes(8, "little")
    at = block.index(b"\0k2" + trailer) + 3
    forged = block[:at] + (9 << 8 | VALUE).to_bytes(8, "little") + block[at + 8:]
    reader = _Reader(data, NAME)
    reader.footer()  # the checksum type: XXH3
    resealed = data[:offset] + forged + data[offset + size:offset + size + 1] + struct.pack(
        "<I", reader.block_checksum(forged, data[offset + size], offset)) + data[offset + size + 5:]
    with pytest.raises(CorruptSavepointError, match="ingested file's entry of sequence 9") as err:
        list(open_sst(resealed, NAME).entries())
    assert err.value.byte_range == (offset, offset + size)


@pytest.mark.parametrize("fraction", [0.0, 0.2, 0.4, 0.6, 0.8, 0.99])
def test_a_budget_running_out_gives_the_entry_by_entry_reads_error(fraction: float, tmp_path: pathlib.Path) -> None:
    """Blocks are decompressed and decoded many at once; what they are charged is replayed in the
    entry-by-entry read's order, so the budget runs out at the same block with the same error (a
    2.3.0 file of 12 data blocks)."""
    source = committed_snapshot(DATA / "2.3.0-rocksdb-incremental-windows-heap-timers", tmp_path)
    with FlinkSavepoint.open(source, uids=["payloads"]) as sp:
        handle = sp.operator("payloads").state.subtasks[0].managed_keyed_state
        assert isinstance(handle, IncrementalHandle)
        buffer, start, end, _ = sp.store.open(max(sst_files(handle), key=lambda f: f[1].size)[1])
        raw = bytes(buffer[start:end])

    def opened(budget: int) -> tuple[SstFile, _Reader]:
        sst = open_sst(raw, NAME)
        assert sst._reader is not None and len(sst._blocks) == 12
        sst._reader.budget.left = budget
        return sst, sst._reader

    def entry_by_entry(budget: int) -> tuple[int, str | None]:
        sst, reader = opened(budget)
        try:
            for handle in sst._blocks:
                reader.columns(reader.block(handle, "data"), handle[0], "data")
        except CorruptSavepointError as err:
            return reader.budget.left, str(err)
        return reader.budget.left, None

    full = 1 << 40
    budget = int((full - entry_by_entry(full)[0]) * fraction)
    _, expected = entry_by_entry(budget)
    assert expected is not None
    with pytest.raises(CorruptSavepointError) as err:
        list(opened(budget)[0].entries())
    assert str(err.value) == expected


def test_random_files_read_the_same_a_key_group_at_a_time_as_merged() -> None:
    """Seeded random column families (1 to 3 files; values, appends, deletions, several versions of
    a key in a file, files of disjoint or interleaved sequence ranges, sometimes a range deletion)
    read the same resolved a key group at a time as merged entry by entry."""
    rng = np.random.default_rng(5)
    kinds = [VALUE, VALUE, VALUE, MERGE, DELETION, SINGLE_DELETION]
    for _ in range(400):
        sequences = iter(rng.permutation(1000).tolist() if rng.random() < 0.5 else range(1000))
        files = []
        for _ in range(int(rng.integers(1, 4))):
            keys = sorted({bytes([int(rng.integers(4))]) + b"k%d" % rng.integers(6) for _ in range(rng.integers(1, 12))})
            file_kinds = [VALUE] if rng.random() < 0.4 else kinds
            rows = []
            for key in keys:
                versions = sorted((next(sequences) for _ in range(1 if rng.random() < 0.8 else 2)), reverse=True)
                rows += [(key, s, file_kinds[int(rng.integers(len(file_kinds)))], b"v%d" % s) for s in versions]
            deletions = [(b"\x01k2", b"\x02k1", next(sequences))] if rng.random() < 0.2 else []
            files.append(Entries(rows, deletions))
        assert list(live_rows(files, range(1, 4), 1, "test")) == list(live_rows(files, range(1, 4), 1, "test", False))



@pytest.mark.parametrize("long", [False, True])
def test_keys_of_several_files_sort_bytewise_as_merged(long: bool) -> None:
    """Keys of one key group in several files, resolved as columns, come out in the merge's
    bytewise order: keys that are prefixes of others, trailing zero bytes, bytes above 0x7f, and
    (``long``) keys past the width sorted as fixed-width strings; a key in two files takes the
    newest file's value."""
    rng = np.random.default_rng(11)
    alphabet = [b"\x00", b"\x01", b"a", b"\x7f", b"\x80", b"\xff"]
    for _ in range(200):
        sequence = 0
        files = []
        for _ in range(int(rng.integers(2, 4))):
            keys = sorted({b"\x01" + b"".join(alphabet[int(i)] for i in rng.integers(len(alphabet), size=n))
                           * (40 if long else 1) for n in rng.integers(0, 4, size=int(rng.integers(1, 10)))})
            sequence += len(keys)
            files.append(Entries([(key, sequence - i, VALUE, b"v%d" % (sequence - i)) for i, key in enumerate(keys)]))
        by_group = live_rows(files, range(0, 4), 1, "test")
        assert _listed(by_group) == _listed(live_rows(files, range(0, 4), 1, "test", False))

# -- hostile tables built around a real file's properties ----------------------------------------

def _internal(user_key: bytes, sequence: int, kind: int = VALUE) -> bytes:
    return user_key + struct.pack("<Q", sequence << 8 | kind)


def _table(blocks: list[tuple[bytes, int]], *, props: dict[bytes, bytes] | None = None,
           index: Callable[[list[tuple[int, int]]], bytes] | None = None) -> bytes:
    """A format_version 5 crc32c table of the data ``blocks`` (stored contents, compression type)
    with the real inline file's properties (index values not delta-encoded, and no counts of
    blocks and entries, unless ``props`` say so) and, by default, an index naming each block in turn."""
    reader = _Reader(_inline_sst(), NAME)
    real, _ = _external_props(_inline_sst())
    real = {k: v for k, v in real.items() if k not in (b"rocksdb.num.data.blocks", b"rocksdb.num.entries")}
    out = b""

    def sealed(contents: bytes, kind: int = 0) -> tuple[int, int]:
        nonlocal out
        at = len(out)
        out += contents + bytes([kind]) + struct.pack("<I", reader.block_checksum(contents, kind, at))
        return at, len(contents)

    handles = [sealed(contents, kind) for contents, kind in blocks]
    index_block = index(handles) if index else _block({b"k%04d" % i: varint(o) + varint(s)
                                                      for i, (o, s) in enumerate(handles)})
    at, size = sealed(_block({**real, b"rocksdb.index.value.is.delta.encoded": b"\0", **(props or {})}))
    index_handle = sealed(index_block)
    metaindex = sealed(_block({b"rocksdb.properties": varint(at) + varint(size)}))
    return _with_footer(out + _inline_sst()[-53:], metaindex, index_handle)


def _data_block(keys: list[bytes]) -> bytes:
    return _block({_internal(k, 5): b"v" + k for k in keys})


def _traced_peak(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        with contextlib.suppress(CorruptSavepointError):
            read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("kind", "compress"), [
    (1, lambda b: bytes(cramjam.snappy.compress_raw(b))[len(varint(len(b))):]),  # its own size header, replaced
    (4, lambda b: bytes(cramjam.lz4.compress_block(b, store_size=False))),
    (7, lambda b: bytes(cramjam.zstd.compress(b))),
])
def test_a_block_declaring_more_than_its_format_expands_to_is_refused_before_allocating(
        kind: int, compress: Callable[[bytes], bytes]) -> None:
    """60 MiB declared over a few dozen stored bytes: each format bounds its expansion (Snappy 22,
    LZ4 255, zstd 32768 times the stored bytes), so the lie is refused with no buffer allocated."""
    stored = compress(_data_block([b"\0a", b"\0b"]))
    data = _table([(varint(60 << 20) + stored, kind)])
    with pytest.raises(CorruptSavepointError, match="declares 62914560 uncompressed bytes") as err:
        read_sst(data, NAME)
    assert err.value.byte_range == (0, 4)
    assert _traced_peak(lambda: read_sst(data, NAME)) < 1 << 20


@pytest.mark.parametrize(("kind", "compress"), [
    (4, lambda b: bytes(cramjam.lz4.compress_block(b, store_size=False))),
    (7, lambda b: bytes(cramjam.zstd.compress(b))),
])
def test_a_block_decompressing_to_fewer_bytes_than_declared_is_corrupt(
        kind: int, compress: Callable[[bytes], bytes]) -> None:
    """cramjam's one-shot calls pad a short output with zeros up to the size asked for; the
    reader decompresses into exactly the declared size and counts what was written."""
    block = _data_block([b"\0a", b"\0b"])
    stored = compress(block)
    assert read_sst(_table([(varint(len(block)) + stored, kind)]), NAME)
    with pytest.raises(CorruptSavepointError, match=f"decompresses to {len(block)} bytes, not {len(block) + 3}"):
        read_sst(_table([(varint(len(block) + 3) + stored, kind)]), NAME)


def _delta_index(size_deltas: list[int]) -> Callable[[list[tuple[int, int]]], bytes]:
    """A delta-encoded index: the first block's full handle, then per block a zigzag size delta."""
    def index(handles: list[tuple[int, int]]) -> bytes:
        first = varint(0) + varint(4) + b"k000" + varint(handles[0][0]) + varint(handles[0][1])
        body = first + b"".join(varint(1) + varint(3) + b"%03d" % (i + 1) + varint((d << 1) ^ (d >> 63))
                                for i, d in enumerate(size_deltas))
        return body + struct.pack("<II", 0, 1)
    return index


def test_a_delta_encoded_index_making_a_negative_block_size_is_corrupt() -> None:
    blocks = [(_data_block([b"\0k%d" % i]), 0) for i in range(3)]
    delta = {b"rocksdb.index.value.is.delta.encoded": b"\x01"}
    assert len(read_sst(_table(blocks, props=delta, index=_delta_index([0, 0])), NAME)) == 3
    with pytest.raises(CorruptSavepointError, match="size delta -100 makes a block of -") as err:
        read_sst(_table(blocks, props=delta, index=_delta_index([-100, 0])), NAME)
    assert err.value.path == NAME and err.value.byte_range is not None


def test_one_expansion_budget_covers_all_files_of_a_read() -> None:
    """A block repeating an 8000-byte key through shared prefixes (3 bytes an entry) expands
    quadratically; every file used to bring its own 64 MiB allowance, so many small files held
    64 MiB each at once in the merge. The files of one read share one budget."""
    key = _internal(b"\0" + bytes(7991), 5)
    body = varint(0) + varint(len(key)) + varint(0) + key + (varint(len(key)) + varint(0) + varint(0)) * 5000
    hostile = _table([(body + struct.pack("<II", 0, 1), 0)])
    assert next(open_sst(hostile, NAME).entries())  # 40 MB of keys: within one file's budget
    budget = ExpansionBudget(8 * len(hostile))
    files = [open_sst(hostile, f"{i}.sst", budget) for i in range(8)]
    with pytest.raises(CorruptSavepointError, match="keys expand beyond 64 MiB and 1024 times the files' size"):
        for sst in files:
            next(sst.entries())
    assert budget.left >= 0


def test_two_entries_of_one_key_and_sequence_are_corrupt_not_merged_twice() -> None:
    """A file listed twice in a handle (or two files that disagree) would double every LIST
    state's appends; RocksDB numbers each write once, so a repeated (key, sequence) is corrupt."""
    merges = next(open_sst(p.read_bytes(), p.name) for p in sorted((DATA / "2.3.0-rocksdb-incremental-churn" /
                                                                     "shared").iterdir())
                  if any(kind == MERGE for _, _, kind, _ in open_sst(p.read_bytes(), p.name).entries()))
    assert list(live_rows([merges], range(0, 128), 1, "chk"))
    with pytest.raises(CorruptSavepointError, match="two entries of key .* with sequence number"):
        list(live_rows([merges, merges], range(0, 128), 1, "chk"))
    with pytest.raises(CorruptSavepointError, match="two entries of key 0161 with sequence number 3"):
        list(live_rows([Entries([(b"\x01a", 3, VALUE, b"x")]), Entries([(b"\x01a", 3, DELETION, b"")])],
                       range(0, 4), 1, "t"))


def test_each_key_group_visits_only_the_states_holding_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A meta stream naming thousands of states made every key group of the SST files visit every
    state (states x key groups: seconds for a few hundred KB); the real checkpoint's subtask, with
    5000 more (empty) states, reads the same rows with one visit per state and key group holding rows."""
    takes = 0
    original = native._State.take

    def counted(state: native._State, group: int) -> int:
        nonlocal takes
        takes += 1
        return original(state, group)

    with FlinkSavepoint.open(DATA / "1.16.3-rocksdb-full-seeds" / "checkpoint") as sp:
        op = next(o for o in sp.operators if any(isinstance(s.managed_keyed_state, IncrementalHandle)
                                                 for s in o.state.subtasks))
        sub = next(s for s in op.state.subtasks if isinstance(s.managed_keyed_state, IncrementalHandle))
        handle = sub.managed_keyed_state
        meta = op._keyed_head(handle)
        many = dataclasses.replace(meta, states=meta.states + [dataclasses.replace(meta.states[0], name=f"more-{i}")
                                                               for i in range(5000)])
        expected = {name: rows.keys.to_pylist() for part in native.iter_native_subtask(
            op._sst_bytes, handle, 0, 1, meta, "chk") for name, (_, rows) in part.states.items()}
        monkeypatch.setattr(native._State, "take", counted)
        read = {name: rows.keys.to_pylist() for part in native.iter_native_subtask(
            op._sst_bytes, handle, 0, 1, many, "chk") for name, (_, rows) in part.states.items()}
    assert {name: keys for name, keys in read.items() if name in expected} == expected
    assert not any(keys for name, keys in read.items() if name not in expected)
    groups_holding = sum(len({k[0] for k in keys}) for keys in expected.values())
    assert groups_holding and takes == groups_holding


def test_an_index_or_blocks_holding_other_counts_than_the_properties_are_corrupt() -> None:
    """A table builder counts the data blocks and entries it writes (checked equal on every real
    file of tests/flink/data, range deletions counted among the entries): an index leaving out a
    block would read as a shorter state, silently."""
    blocks = [(_data_block([b"\0k%d" % i]), 0) for i in range(3)]
    counts = {b"rocksdb.num.data.blocks": varint(3), b"rocksdb.num.entries": varint(3)}
    assert len(read_sst(_table(blocks, props=counts), NAME)) == 3
    two = _table(blocks, props=counts, index=lambda handles: _block({b"k%04d" % i: varint(o) + varint(s)
                                                                    for i, (o, s) in enumerate(handles[:2])}))
    with pytest.raises(CorruptSavepointError, match="index names 2 data blocks, the properties count 3"):
        read_sst(two, NAME)
    more = _table(blocks, props={**counts, b"rocksdb.num.entries": varint(4)})
    with pytest.raises(CorruptSavepointError, match="data blocks hold 3 entries, the properties count 4"):
        read_sst(more, NAME)


def _forst_sst(tmp_path: pathlib.Path) -> bytes:
    """An SST file of the 2.3.0 ForSt incremental checkpoint: a partitioned index of one partition."""
    shared = committed_snapshot(DATA / "2.3.0-forst-incremental-churn", tmp_path).parent / "shared"
    magic = struct.pack("<Q", BLOCK_BASED_MAGIC)
    tables = [f.read_bytes() for f in sorted(shared.iterdir()) if f.read_bytes()[-8:] == magic]
    return next(data for data in tables if open_sst(data, NAME).index == "partitioned")


@pytest.mark.parametrize(("copies", "error"), [(40, "top-level index names 40 index partitions, the properties "
                                                    "count 1"),
                                               (300, "more index partition bytes than the file")])
def test_a_top_level_index_naming_one_partition_over_and_over_is_corrupt(copies: int, error: str,
                                                                          tmp_path: pathlib.Path) -> None:
    """The partitions a top-level index names do not overlap either: more of their bytes than the
    file has is corrupt before any is read, fewer still must be as many as the properties count."""
    data = _forst_sst(tmp_path)
    reader = _Reader(data, NAME)
    reader.footer()  # the checksum type: XXH3
    metaindex, (offset, size) = _handles(data)
    block = data[offset:offset + size]
    assert struct.unpack_from("<I", block, size - 4)[0] == 1  # one partition, one restart point
    entry = block[:-8]
    forged = entry * copies + b"".join(struct.pack("<I", i * len(entry)) for i in range(copies)) \
        + struct.pack("<I", copies)
    at = len(data) - 53
    grown = data[:at] + forged + b"\0" + struct.pack("<I", reader.block_checksum(forged, 0, at)) + data[at:]
    with pytest.raises(CorruptSavepointError, match=error):
        read_sst(_with_footer(grown, metaindex, (at, len(forged))), NAME)
