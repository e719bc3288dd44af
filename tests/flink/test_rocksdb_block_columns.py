"""RocksDB data blocks decoded many at once (pyref.flink.rocksdb.block_columns) read exactly as
entry by entry (_Reader.columns): every data block of the committed real Flink SST files, and
hand-built blocks of every layout the batch read leaves to the entry-by-entry one."""

from __future__ import annotations

import pathlib
import struct

import numpy as np
import pytest

from pyref.errors import CorruptSavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint
from pyref.flink.dataoutput import varint
from pyref.flink.handles import IncrementalHandle
from pyref.flink.rocksdb.block_columns import MAX_INTERVAL_ENTRIES, decode_data_blocks
from pyref.flink.rocksdb import native
from pyref.flink.rocksdb.native import live_rows, sst_files
from pyref.flink.rocksdb.sst import _Reader, open_sst

from compat_tests.flink.checkpoints import committed_snapshot
from tests.flink.test_checkpoints import READABLE, ROCKSDB_NATIVE

DATA = pathlib.Path(__file__).resolve().parent / "data" / "checkpoints"


def _entry_by_entry(reader: _Reader, blocks: list[bytes]) -> list[tuple[list[bytes], list[int], list[bytes]]]:
    out = []
    for block in blocks:
        keys, values = reader.columns(block, 0, "data")
        out.append(([k[:-8] for k in keys], [int.from_bytes(k[-8:], "little") for k in keys], values))
    return out


def _at_once(reader: _Reader, blocks: list[bytes]) -> list[tuple[list[bytes], list[int], list[bytes]]] | None:
    points = [reader.restart_points(b, 0, "data") for b in blocks]
    decoded = decode_data_blocks(blocks, [p[0] for p in points], [p[1] for p in points], 1 << 40)
    if decoded is None:
        return None
    return [(keys.to_pylist(), trailers.tolist(), values.to_pylist())
            for keys, trailers, values in map(decoded.block, range(len(blocks)))]


@pytest.mark.parametrize("case", sorted(c for c, layout in READABLE.items() if layout == ROCKSDB_NATIVE))
def test_every_real_data_block_decodes_at_once_as_entry_by_entry(case: str, tmp_path: pathlib.Path) -> None:
    with FlinkSavepoint.open(committed_snapshot(DATA / case, tmp_path)) as sp:
        for op in sp.operators:
            for sub in op.state.subtasks:
                if not isinstance(sub.managed_keyed_state, IncrementalHandle):
                    continue
                for name, stream in sst_files(sub.managed_keyed_state):
                    buffer, start, end, _ = sp.store.open(stream)
                    sst = open_sst(memoryview(buffer)[start:end], name)
                    reader = sst._reader
                    assert reader is not None
                    blocks = [reader.block(handle, "data") for handle in sst._blocks]
                    expected = _entry_by_entry(reader, blocks)
                    assert _at_once(reader, blocks) == expected, name
                    assert [_at_once(reader, [b]) for b in blocks] == [[e] for e in expected], name


def _prefix_block(entries: list[tuple[bytes, bytes]], interval: int, shared_at_restart: bool = False) -> bytes:
    """A block of ``entries`` as RocksDB writes one: keys sharing their prefix with the previous
    key, a restart point every ``interval`` entries (``shared_at_restart``: sharing there too)."""
    body, restarts, previous = b"", [], b""
    for i, (key, value) in enumerate(entries):
        shared = 0
        if i % interval == 0:
            restarts.append(len(body))
        if i % interval or shared_at_restart:
            while shared < min(len(key), len(previous)) and key[shared] == previous[shared]:
                shared += 1
        body += varint(shared) + varint(len(key) - shared) + varint(len(value)) + key[shared:] + value
        previous = key
    return body + b"".join(struct.pack("<I", r) for r in restarts) + struct.pack("<I", len(restarts))


def _entries(count: int, value_size: int = 8) -> list[tuple[bytes, bytes]]:
    return [(b"\x01\x09key-%05d" % i + (1000 - i << 8 | 1).to_bytes(8, "little"), bytes([i % 251]) * value_size)
            for i in range(count)]


@pytest.mark.parametrize("value_size", [0, 8, 200, 20000])  # varints of 1, 2 and 3 bytes
@pytest.mark.parametrize("interval", [1, 16, MAX_INTERVAL_ENTRIES])
def test_hand_built_blocks_decode_at_once(interval: int, value_size: int) -> None:
    reader = _Reader(b"", "test")
    blocks = [_prefix_block(_entries(300, value_size), interval), _prefix_block(_entries(7, value_size), interval)]
    assert _at_once(reader, blocks) == _entry_by_entry(reader, blocks)


def test_keys_sharing_the_previous_keys_trailer_decode_at_once() -> None:
    """A key may share bytes of the previous key's 8-byte trailer: versions of one user key, and
    a user key that extends the previous one by bytes equal to its trailer's (here with 8 or
    more bytes of its own, so only the sharing tells it from the common layout)."""
    reader = _Reader(b"", "test")
    trailer = (5 << 8 | 1).to_bytes(8, "little")
    entries = [(b"\x01a" + (9 << 8 | 2).to_bytes(8, "little"), b"x"),
               (b"\x01a" + (7 << 8 | 2).to_bytes(8, "little"), b"y"),
               (b"\x01b" + trailer, b"z"), (b"\x01b" + trailer[:3] + b"longer-key" + trailer, b"w")]
    blocks = [_prefix_block(entries, 16), _prefix_block(entries[2:], 16)]
    assert _at_once(reader, blocks) == _entry_by_entry(reader, blocks)
    assert _at_once(reader, [blocks[1]])[0][0] == [b"\x01b", b"\x01b" + trailer[:3] + b"longer-key"]


@pytest.mark.parametrize("block", [
    _prefix_block(_entries(MAX_INTERVAL_ENTRIES + 1), MAX_INTERVAL_ENTRIES + 1),  # an interval too long
    _prefix_block(_entries(40), 16, shared_at_restart=True),  # a restart entry sharing key bytes
    _prefix_block([(b"\x01short", b"v")], 1),  # a key shorter than its trailer
])
def test_blocks_of_other_layouts_are_left_to_the_entry_by_entry_read(block: bytes) -> None:
    reader = _Reader(b"", "test")
    assert _at_once(reader, [block]) is None
    reader.columns(block, 0, "data")  # which reads them as it always did


def test_restart_points_out_of_order_or_an_overrun_are_left_to_the_entry_by_entry_read() -> None:
    reader = _Reader(b"", "test")
    block = bytearray(_prefix_block(_entries(40), 16))
    limit, count = reader.restart_points(bytes(block), 0, "data")
    swapped = block[:limit] + block[limit + 4:limit + 8] + block[limit:limit + 4] + block[limit + 8:]
    assert _at_once(reader, [bytes(swapped)]) is None
    overrun = bytearray(block)
    overrun[2] = 0x7F  # the first entry's value length: past the next restart point
    assert _at_once(reader, [bytes(overrun)]) is None
    points = [reader.restart_points(bytes(block), 0, "data")]
    assert decode_data_blocks([bytes(block)], [points[0][0]], [points[0][1]], budget=100) is None
    assert np.array_equal(_at_once(reader, [bytes(block)])[0][1], _entry_by_entry(reader, [bytes(block)])[0][1])


def test_a_native_savepoint_of_many_blocks_per_file_reads_as_its_job_wrote_it(tmp_path: pathlib.Path) -> None:
    """tests/flink/data/rocksdb-bulk: 9 data blocks a file; read as columns and merged entry by entry
    alike, and in batches of 1 or 4 blocks (key groups spanning batches) as in one."""
    source = committed_snapshot(DATA.parent / "rocksdb-bulk" / "2.3.0-native-savepoint-bulk-3000", tmp_path)
    with FlinkSavepoint.open(source, uids=["bulk"]) as sp:
        op = sp.operator("bulk")
        assert dict(op.keyed_state("value").items()) == {f"k{i:07d}": i for i in range(3000)}
        assert dict(op.keyed_state("log").items()) == {f"k{i:07d}": [2 * i] for i in range(3000)}
        rows_by_family: dict[str, int] = {}
        for sub in op.state.subtasks:
            handle = sub.managed_keyed_state
            assert isinstance(handle, IncrementalHandle)
            for name, stream in sst_files(handle):
                buffer, start, end, _ = sp.store.open(stream)
                sst = open_sst(memoryview(buffer)[start:end], name)
                assert len(sst._blocks) == 9
                rows = list(live_rows([sst], handle.key_groups, 1, name))
                assert rows == list(live_rows([sst], handle.key_groups, 1, name, by_group=False))
                batched = [list(live_rows([sst], handle.key_groups, 1, name, batch_blocks=b)) for b in (1, 4)]
                assert batched == [rows] * 2
                rows_by_family[sst.column_family] = rows_by_family.get(sst.column_family, 0) + sum(
                    len(keys) for _, keys, _ in rows)
    assert rows_by_family == {"value": 3000, "log": 3000}


def test_a_subtasks_files_share_one_allowance_of_blocks_decoded_at_once(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A subtask's files share SUBTASK_BATCH_BLOCKS: each of its files decodes its share of them
    at a time (every file's stream holds its batch at once), and reads the same rows."""
    source = committed_snapshot(DATA.parent / "rocksdb-bulk" / "2.3.0-native-savepoint-bulk-3000", tmp_path)
    with FlinkSavepoint.open(source, uids=["bulk"]) as sp:
        op = sp.operator("bulk")
        files = {len(sst_files(sub.managed_keyed_state)) for sub in op.state.subtasks}
        expected = [(n, rows) for sub in op.keyed_subtasks() for n, (_, rows) in sorted(sub.states.items())]
    assert files == {2}
    batches: set[int] = set()
    blocks = native.SstFile.blocks
    monkeypatch.setattr(native.SstFile, "blocks", lambda self, b: batches.add(b) or blocks(self, b))
    monkeypatch.setattr(native, "SUBTASK_BATCH_BLOCKS", 6)
    monkeypatch.setattr(native, "MIN_BATCH_BLOCKS", 1)
    with FlinkSavepoint.open(source, uids=["bulk"]) as sp:
        read = [(n, rows) for sub in sp.operator("bulk").keyed_subtasks()
                for n, (_, rows) in sorted(sub.states.items())]
    assert batches == {3} and [(n, r.keys, r.values) for n, r in read] == [(n, r.keys, r.values) for n, r in expected]


def test_damaged_blocks_decode_at_once_as_entry_by_entry_or_not_at_all(tmp_path: pathlib.Path) -> None:
    """Real blocks with bytes overwritten (seeded): the batch read gives the entry-by-entry
    read's entries or leaves the block to it, never other entries, and never fails itself."""
    source = committed_snapshot(DATA.parent / "rocksdb-bulk" / "2.3.0-native-savepoint-bulk-3000", tmp_path)
    with FlinkSavepoint.open(source, uids=["bulk"]) as sp:
        handle = sp.operator("bulk").state.subtasks[0].managed_keyed_state
        assert isinstance(handle, IncrementalHandle)
        buffer, start, end, _ = sp.store.open(sst_files(handle)[0][1])
        sst = open_sst(memoryview(buffer)[start:end], "bulk")
    reader = sst._reader
    assert reader is not None
    originals = [reader.block(h, "data") for h in sst._blocks]
    rng = np.random.default_rng(7)
    decoded = 0
    for _ in range(300):
        which = int(rng.integers(len(originals)))
        block = bytearray(originals[which])
        for at in rng.integers(len(block), size=int(rng.integers(1, 4))):
            block[at] = int(rng.integers(256))
        try:
            reader.restart_points(bytes(block), 0, "data")
        except (CorruptSavepointError, UnsupportedFormatError):
            continue
        batch = originals[:which] + [bytes(block)] + originals[which + 1:]  # among its file's other blocks
        at_once = _at_once(reader, batch)
        if at_once is not None:
            decoded += 1
            reader.budget.left = 1 << 40  # the read charges it each time
            assert at_once == _entry_by_entry(reader, batch)
    assert decoded  # some damage (a value's bytes) leaves the layout intact
