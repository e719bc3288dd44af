"""Bounded work per stored byte (spec/format.md §5.9, issue 9 item 12): chunk entries
never share stored bytes (C6), a row is selected once (L6), two data-file entries are
never one file, and a chunk is decoded once per read however its ranges interleave."""

from __future__ import annotations

import os
import re
import tracemalloc

import pytest

from pyref import CorruptSavepointError, DistributionMode, Savepoint, SavepointWriter, rescale
from pyref import reader as reader_module
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.inspection import verify
from pyref.manifest import DATA_FILE_MAGIC, decode_manifest, encode_manifest
from pyref.serializers import Bytes, Int64, String


def _manifest(path) -> pb.Manifest:
    return decode_manifest((path / "_manifest").read_bytes(), path="x")[0]


def _put(path, m: pb.Manifest) -> None:
    (path / "_manifest").write_bytes(encode_manifest(m))  # a valid envelope around whatever the test wants


def _lists(path, mode: DistributionMode, parallelism: int = 2, per_subtask: int = 3) -> None:
    with SavepointWriter(str(path), inline_bytes=0) as w:
        st = w.add_operator("op", parallelism=parallelism).list_state("s", Int64(), mode)
        for i in range(parallelism):
            st.add(i, [10 * i + k for k in range(per_subtask)])


def test_chunk_entries_over_one_stored_range_are_refused_at_open(tmp_path):
    """The issue's attack: thousands of chunk entries over one 2 KiB zstd range of 64 MiB
    of zeros would decompress 64 GiB; it is refused from the manifest, reading nothing."""
    with SavepointWriter(str(tmp_path / "sp"), inline_bytes=0) as w:
        st = w.add_operator("op", parallelism=1, key_serializer=String()).keyed_state("k", Bytes())
        st.add(["a"], [bytes(64 << 20)])
    m = _manifest(tmp_path / "sp")
    chunks = m.operators[0].keyed_states[0].chunks
    bomb = pb.Chunk()
    bomb.CopyFrom(chunks[0])
    assert bomb.codec == pb.ZSTD and bomb.range.length < 4096
    chunks.extend([bomb] * 2000)
    _put(tmp_path / "sp", m)
    assert os.path.getsize(tmp_path / "sp" / "_manifest") < 200_000
    tracemalloc.start()
    try:
        with pytest.raises(CorruptSavepointError, match=r"share stored bytes .*rule C6"):
            Savepoint.open(tmp_path / "sp")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_a_partial_overlap_across_operators_is_refused_naming_both_states(tmp_path):
    with SavepointWriter(str(tmp_path / "sp"), inline_bytes=0) as w:
        for name in ("a", "b"):
            w.add_operator(name, parallelism=1).list_state("s", Bytes()).add(0, [os.urandom(300)])
    m = _manifest(tmp_path / "sp")
    first, second = (op.list_states[0].chunks[0].range for op in m.operators)
    second.offset = first.offset + first.length - 1
    _put(tmp_path / "sp", m)
    with pytest.raises(CorruptSavepointError, match="chunks of a/s and b/s share stored bytes") as info:
        Savepoint.open(tmp_path / "sp")
    assert info.value.byte_range == (second.offset, second.offset + 1)


@pytest.mark.parametrize("mode", [DistributionMode.SPLIT_DISTRIBUTE, DistributionMode.UNION])
def test_a_row_selected_by_two_partitions_is_refused(tmp_path, mode):
    _lists(tmp_path / "sp", mode)
    m = _manifest(tmp_path / "sp")
    partitions = m.operators[0].list_states[0].partitions
    partitions[1].ranges.add(chunk=partitions[0].ranges[0].chunk, first=2, count=1)
    _put(tmp_path / "sp", m)
    with pytest.raises(CorruptSavepointError, match=r"rows 2\.\.2 of chunk 0 are selected twice \(partitions 0 and 1\)"):
        Savepoint.open(tmp_path / "sp")


def test_broadcast_partitions_share_rows_but_a_partition_selects_a_row_once(tmp_path):
    _lists(tmp_path / "sp", DistributionMode.BROADCAST)
    m = _manifest(tmp_path / "sp")
    partitions = m.operators[0].list_states[0].partitions
    partitions[1].CopyFrom(partitions[0])  # both subtasks hold the same list: valid
    _put(tmp_path / "sp", m)
    assert [list(Savepoint.open(tmp_path / "sp").operator("op").list_state("s").partition(i)) for i in (0, 1)] == [
        [0, 1, 2]] * 2
    partitions[0].ranges.add(chunk=0, first=1, count=2)
    _put(tmp_path / "sp", m)
    with pytest.raises(CorruptSavepointError, match="selected twice"):
        Savepoint.open(tmp_path / "sp")


@pytest.mark.parametrize("mode", list(DistributionMode))
def test_rescale_chains_keep_rows_selected_once(tmp_path, mode):
    """Rescaling re-cuts partitions by reference (with the rotation of spec/redistribution.md),
    which may make a partition come back to a chunk: legal, and every result opens."""
    _lists(tmp_path / "p0", mode, parallelism=3, per_subtask=5)
    previous = "p0"
    for step, parallelism in enumerate((2, 5, 4, 1, 3, 7)):
        rescale(tmp_path / previous, tmp_path / f"p{step + 1}", parallelism)
        previous = f"p{step + 1}"
        view = Savepoint.open(tmp_path / previous).operator("op").list_state("s")
        elements = [e for i in range(view.partition_count) for e in view.partition(i)]
        if mode is DistributionMode.SPLIT_DISTRIBUTE:
            assert sorted(elements) == sorted(10 * i + k for i in range(3) for k in range(5))


def test_a_chunk_is_decoded_once_however_the_ranges_of_a_partition_interleave(tmp_path, monkeypatch):
    _lists(tmp_path / "sp", DistributionMode.SPLIT_DISTRIBUTE, per_subtask=4)
    m = _manifest(tmp_path / "sp")
    state = m.operators[0].list_states[0]
    a, b = (p.ranges[0].chunk for p in state.partitions)
    del state.partitions[1].ranges[:]
    del state.partitions[0].ranges[:]
    for row in range(4):  # A0 B0 A1 B1 ...: distinct rows, two chunks
        state.partitions[0].ranges.add(chunk=a, first=row, count=1)
        state.partitions[0].ranges.add(chunk=b, first=row, count=1)
    _put(tmp_path / "sp", m)
    decoded = []
    original = reader_module.decode_chunk
    monkeypatch.setattr(reader_module, "decode_chunk", lambda *args, **kw: decoded.append(1) or original(*args, **kw))
    view = Savepoint.open(tmp_path / "sp").operator("op").list_state("s")
    assert list(view.partition(0)) == [0, 10, 1, 11, 2, 12, 3, 13]
    assert len(decoded) == 2
    assert view.arrow_ranges(state.partitions[0].ranges).to_pylist() == [0, 10, 1, 11, 2, 12, 3, 13]
    assert len(decoded) == 4


@pytest.mark.parametrize("link", [os.symlink, os.link], ids=["symlink", "hard link"])
def test_two_data_file_entries_that_are_one_file_are_refused_before_reading_the_second(tmp_path, link):
    """C6 compares ranges per data-file entry: a second name for one file would let chunk
    entries share stored bytes again."""
    with SavepointWriter(str(tmp_path / "sp"), inline_bytes=0) as w:
        w.add_operator("op", parallelism=1, key_serializer=String()).keyed_state("k", Int64()).add(
            ["a", "b", "c"], [1, 2, 3])
    m = _manifest(tmp_path / "sp")
    (real,) = m.data_files
    link(tmp_path / "sp" / real.path, tmp_path / "sp" / "data" / "again.svd")
    m.data_files.add(path="data/again.svd", size=real.size)
    chunks = m.operators[0].keyed_states[0].chunks
    again = pb.Chunk()
    again.CopyFrom(chunks[-1])
    again.range.file = 1  # the same bytes under the second name
    chunks.append(again)
    _put(tmp_path / "sp", m)
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("k")
    with pytest.raises(CorruptSavepointError, match="'data/again.svd' are the same file"):
        list(view.items())
    assert (tmp_path / "sp" / "data" / "again.svd").read_bytes()[:8] == DATA_FILE_MAGIC


def test_a_second_name_of_a_base_is_refused_only_where_a_read_goes_through_it(tmp_path):
    """spec/format.md §6.2: two bases that resolve to one directory (here a link beside them) are
    no error by themselves; a read refuses chunk bytes taken through two entries that are one file.
    A reader that refused the second name when it resolved the bases read this differently."""
    with SavepointWriter(str(tmp_path / "base"), inline_bytes=0) as w:
        w.add_operator("op", parallelism=1, key_serializer=String()).keyed_state("k", Int64()).add(
            ["a", "b", "c"], [1, 2, 3])
    rescale(tmp_path / "base", tmp_path / "sp", 2)
    os.symlink(tmp_path / "base", tmp_path / "alias")
    m = _manifest(tmp_path / "sp")
    m.bases.add(directory="alias", savepoint_id=m.bases[0].savepoint_id)
    first = len(m.data_files)
    m.data_files.extend([pb.DataFile(path=f.path, size=f.size, base=2) for f in m.data_files])
    _put(tmp_path / "sp", m)
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("k")
    assert dict(view.items()) == {"a": 1, "b": 2, "c": 3}  # nothing read through "alias"
    chunks = m.operators[0].keyed_states[0].chunks
    assert len(chunks) > 1
    chunks[-1].range.file += first  # the last chunk's bytes through the second name
    _put(tmp_path / "sp", m)
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("k")
    with pytest.raises(CorruptSavepointError, match="are the same file"):
        list(view.items())


def _every_1_2_part(path) -> None:
    """An operator with keyed state, timers, a broadcast state and coordinator state, all in a data file."""
    with SavepointWriter(str(path), inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=2, key_serializer=String())
        op.keyed_state("v", Int64()).add(["a", "b", "c"], [1, 2, 3])
        op.timer_service("t", "event_time").add(["a", "b", "c"], [10, 20, 30])
        op.broadcast_state("b", String(), Int64()).add_all(["x", "y"], [1, 2])
        op.coordinator_state = b"enumerator"
        w.add_operator("other", parallelism=1).coordinator_state = b"other enumerator"


def _copy_of(chunk: pb.Chunk, **changes) -> pb.Chunk:
    copy = pb.Chunk()
    copy.CopyFrom(chunk)
    for field, value in changes.items():
        setattr(copy, field, value)
    return copy


@pytest.mark.parametrize("share", ["timer chunk over keyed bytes", "second broadcast chunk entry",
                                   "coordinator states over one range"])
def test_format_1_2_chunks_share_no_stored_bytes_either(tmp_path, share):
    """C6 covers every chunk entry of a manifest: timer, broadcast and coordinator chunks too.
    Each change here is valid but for C6 (a reader without it would read the state)."""
    _every_1_2_part(tmp_path / "sp")
    m = _manifest(tmp_path / "sp")
    op, other = m.operators
    if share == "timer chunk over keyed bytes":  # key and value (int64) read as key and timestamp
        service = op.timer_services[0]
        del service.chunks[:]
        service.chunks.extend(op.keyed_states[0].chunks)
        names = "op/v and op/t (timers)"
    elif share == "second broadcast chunk entry":  # partition 1 reads the map through another entry
        state = op.broadcast_states[0]
        state.chunks.append(_copy_of(state.chunks[0]))
        state.partitions[1].ranges[0].chunk = 1
        names = "op/b and op/b"
    else:
        other.coordinator_state.CopyFrom(op.coordinator_state)
        names = "op (coordinator state) and other (coordinator state)"
    _put(tmp_path / "sp", m)
    with pytest.raises(CorruptSavepointError, match=rf"chunks of {re.escape(names)} share stored bytes .*rule C6"):
        Savepoint.open(tmp_path / "sp")


def test_broadcast_state_partitions_share_rows_but_a_partition_selects_a_row_once(tmp_path):
    """L6 for broadcast map state follows the BROADCAST rule of list state: per partition."""
    _every_1_2_part(tmp_path / "sp")
    m = _manifest(tmp_path / "sp")
    partitions = m.operators[0].broadcast_states[0].partitions
    assert partitions[0] == partitions[1]  # one map, both subtasks: valid
    partitions[1].ranges.add(chunk=0, first=1, count=1)
    _put(tmp_path / "sp", m)
    with pytest.raises(CorruptSavepointError, match=r"rows 1\.\.1 of chunk 0 are selected twice \(partitions 1 and 1\)"):
        Savepoint.open(tmp_path / "sp")


def test_verify_decodes_a_broadcast_map_shared_by_every_subtask_once(tmp_path, monkeypatch):
    """B5 is checked per partition; partitions that are copies of one map cost one check,
    and a chunk is decoded for it once, not once per subtask."""
    with SavepointWriter(str(tmp_path / "sp"), inline_bytes=0) as w:
        state = w.add_operator("op", parallelism=200).broadcast_state("b", String(), Int64())
        state.add_all([f"k{i}" for i in range(50)], list(range(50)))
        state.add(7, ["z"], [7])
        state.add(8, ["z"], [8])
    m = _manifest(tmp_path / "sp")
    partitions = m.operators[0].broadcast_states[0].partitions
    own_of_8 = [r for r in partitions[8].ranges if r not in partitions[0].ranges]
    partitions[7].ranges.extend(own_of_8)  # subtask 7's map holds z twice: broken (B5)
    _put(tmp_path / "sp", m)
    decoded = []
    original = reader_module.decode_chunk
    monkeypatch.setattr(reader_module, "decode_chunk", lambda *args, **kw: decoded.append(1) or original(*args, **kw))
    report = verify(Savepoint.open(tmp_path / "sp"))
    assert report.errors and all(e.startswith("partition 7: ") and "rule B5" in e for e in report.errors)
    chunks = len(m.operators[0].broadcast_states[0].chunks)
    assert chunks == 3 and len(decoded) == 2 * chunks  # by the chunk check, and once for the key check
