"""Storage: local files with fsync/rename/lock, and any pyarrow.fs filesystem."""

from __future__ import annotations

import errno
import json
import os

import google_crc32c
import pytest

from pyref import CorruptSavepointError, Savepoint, SavepointNotFoundError, SavepointWriter, rescale
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.cleanup import remove_unreferenced_files
from pyref.cli import main
from pyref.codecs import MAX_RAW_LENGTH
from pyref.errors import StorageError
from pyref.inspection import verify
from pyref.io import ArrowIO, LocalIO, check_relative_path, open_io
from pyref.manifest import DATA_FILE_MAGIC, encode_manifest
from pyref.serializers import Int64
from pyref.testing import write_seeds


def test_open_io_picks_the_implementation(tmp_path):
    assert isinstance(open_io(str(tmp_path)), LocalIO)
    assert isinstance(open_io(f"file://{tmp_path}"), LocalIO)
    io = ArrowIO(f"file://{tmp_path}")
    assert open_io(io) is io


def test_arrow_filesystem_round_trip_and_shallow_rescale(tmp_path):
    """The code path of hdfs://, s3a:// and gs://, exercised on pyarrow's local filesystem."""
    source, target = ArrowIO(f"file://{tmp_path}/sp"), ArrowIO(f"file://{tmp_path}/sp4")
    with SavepointWriter(source, inline_bytes=0) as w:
        w.add_operator("op", parallelism=2).list_state("s", Int64()).add(0, [1, 2, 3, 4])
    rescale(source, target, 4)
    plan = Savepoint.open(ArrowIO(f"file://{tmp_path}/sp4")).restore_plan(4)
    assert [list(s.list_state("s")) for s in plan.subtasks("op")] == [[1], [2], [3], [4]]
    assert not os.path.exists(tmp_path / "sp4" / "data")


@pytest.mark.parametrize("make_io", [lambda p: LocalIO(str(p)), lambda p: ArrowIO(f"file://{p}")], ids=["local", "arrow"])
def test_symlink_out_of_the_savepoint_is_refused(tmp_path, make_io):
    """ArrowIO on file:// (the HDFS code path on local files) followed the link, reading outside."""
    write_seeds(tmp_path / "sp", inline_bytes=0)
    data_file = next((tmp_path / "sp" / "data").iterdir())
    outside = tmp_path / "outside.svd"
    os.replace(data_file, outside)
    os.symlink(outside, data_file)
    with pytest.raises(CorruptSavepointError, match="outside the savepoint directory"):
        list(Savepoint.open(make_io(tmp_path / "sp")).operator("kafka-source").list_state("offsets").partition(0))


@pytest.mark.parametrize("make_io", [lambda p: LocalIO(str(p)), lambda p: ArrowIO(f"file://{p}")], ids=["local", "arrow"])
def test_a_base_name_linked_out_of_the_parent_is_refused(tmp_path, make_io):
    """ArrowIO on file:// read a base whose name in the parent was a link to another directory."""
    write_seeds(tmp_path / "elsewhere" / "base", inline_bytes=0)
    os.makedirs(tmp_path / "parent")
    os.symlink(tmp_path / "elsewhere" / "base", tmp_path / "parent" / "base")
    rescale(LocalIO(str(tmp_path / "elsewhere" / "base")), LocalIO(str(tmp_path / "elsewhere" / "derived")), 1)
    os.replace(tmp_path / "elsewhere" / "derived", tmp_path / "parent" / "derived")  # names its base 'base'
    with pytest.raises(CorruptSavepointError, match="leads out of the parent directory"):
        list(Savepoint.open(make_io(tmp_path / "parent" / "derived")).operator("kafka-source").list_state(
            "offsets").partition(0))


@pytest.mark.parametrize(("target", "error"), [("real/x", CorruptSavepointError), ("_manifest", CorruptSavepointError),
                                                ("gone", SavepointNotFoundError)],
                         ids=["through-a-file", "loop", "dangling"])
def test_a_manifest_link_that_cannot_be_resolved_is_corrupt_a_dangling_one_is_absent(tmp_path, target, error):
    """spec/format.md §4.2 step 1: in a savepoint directory, a `_manifest` whose path runs through a
    regular file or loops is corrupt; a dangling link is an absent manifest. pyref took the first for
    a location that is not a directory (a clean-room reader found it)."""
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "real").write_text("x")
    os.symlink(target, tmp_path / "sp" / "_manifest")
    with pytest.raises(error):
        Savepoint.open(tmp_path / "sp")
    with pytest.raises(SavepointNotFoundError):  # a location that is a regular file holds no savepoint
        Savepoint.open(tmp_path / "sp" / "real")


@pytest.mark.parametrize("path", ["data/x.svd", "a/b/c"])
def test_safe_relative_paths(path):
    assert check_relative_path(path) == path


@pytest.mark.parametrize("make_io", [lambda p: LocalIO(str(p)), lambda p: ArrowIO(f"file://{p}")], ids=["local", "arrow"])
def test_truncated_data_file_names_the_byte_range(tmp_path, make_io):
    write_seeds(tmp_path / "sp", inline_bytes=0)
    io = make_io(tmp_path / "sp")
    rel = io.list_files("data")[0]
    with pytest.raises(CorruptSavepointError, match="file ends after") as info:
        io.read_range(rel, 0, io.size(rel) + 10)
    assert info.value.byte_range == (0, io.size(rel) + 10)


@pytest.mark.parametrize("make_io", [lambda p: LocalIO(str(p)), lambda p: ArrowIO(f"file://{p}")], ids=["local", "arrow"])
def test_deleting_a_file_that_is_already_gone_is_not_an_error(tmp_path, make_io):
    # clean and a writer's abort may race to delete the same leftover file: the loser must not fail.
    write_seeds(tmp_path / "sp", inline_bytes=0)
    io = make_io(tmp_path / "sp")
    rel = io.list_files("data")[0]
    io.delete(rel)
    io.delete(rel)
    assert io.size(rel) is None


def test_short_reads_are_continued(tmp_path, monkeypatch):
    """Issue 9 item 5: one pread returns at most 0x7ffff000 bytes on Linux; the reader did one
    and called the chunk corrupt. Here every pread is capped at 300 bytes."""
    write_seeds(tmp_path / "sp", inline_bytes=0, codec="none")
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, offset: real_pread(fd, min(n, 300), offset))
    io = LocalIO(tmp_path / "sp")
    rel = io.list_files("data")[0]
    assert io.size(rel) > 1000
    with open(tmp_path / "sp" / rel, "rb") as f:
        assert io.read_range(rel, 5, io.size(rel) - 5) == f.read()[5:]
    assert io.read_file("_manifest") == (tmp_path / "sp" / "_manifest").read_bytes()
    assert verify(Savepoint.open(tmp_path / "sp")).ok


def _crc32c_of_zeros(length: int) -> int:
    crc, block = 0, bytes(64 << 20)
    for start in range(0, length, len(block)):
        crc = google_crc32c.extend(crc, block[:min(len(block), length - start)])
    return crc


@pytest.mark.slow
@pytest.mark.parametrize("arrow", [False, True], ids=["local", "arrow"])
def test_a_chunk_of_the_largest_legal_size_reads(tmp_path, arrow):
    """Issue 9 item 5 at its real size: a stored chunk of 2^31 - 1 bytes (4 GiB of RAM)."""
    length = MAX_RAW_LENGTH
    sp = tmp_path / "sp"
    (sp / "data").mkdir(parents=True)
    with open(sp / "data" / "big.svd", "wb") as f:
        f.write(DATA_FILE_MAGIC)
        f.truncate(len(DATA_FILE_MAGIC) + length)  # sparse: zeros, no disk space
    chunk = pb.Chunk(codec=0, row_count=0, raw_length=length, crc32c=_crc32c_of_zeros(length))
    chunk.range.file, chunk.range.offset, chunk.range.length = 0, len(DATA_FILE_MAGIC), length
    m = pb.Manifest(savepoint_id="big", data_files=[pb.DataFile(path="data/big.svd", size=8 + length)])
    m.operators.add(operator_id="op", parallelism=1, max_parallelism=1).list_states.add(
        name="s", mode=pb.SPLIT_DISTRIBUTE, element_serializer=Int64().snapshot(), chunks=[chunk],
        partitions=[pb.Partition()])
    (sp / "_manifest").write_bytes(encode_manifest(m))
    opened = Savepoint.open(ArrowIO(f"file://{sp}") if arrow else sp)
    stored = opened.store.read_stored(opened.manifest.operators[0].list_states[0].chunks[0], "op/s")
    assert len(stored) == length


def test_a_lock_file_that_is_a_link_is_never_followed(tmp_path):
    """Issue 9 item 7: .lock was opened with O_CREAT and without O_NOFOLLOW, so a planted link
    made writers and clean create files anywhere the user can write."""
    sp = tmp_path / "sp"
    write_seeds(sp, inline_bytes=0)
    (sp / "data" / "leftover.svd").write_bytes(b"left by a killed writer")
    before = (sp / "_manifest").read_bytes(), sorted(os.listdir(sp / "data"))
    (tmp_path / "elsewhere").mkdir()
    victim = tmp_path / "elsewhere" / "created-by-pyref"
    os.unlink(sp / ".lock")
    os.symlink(victim, sp / ".lock")
    with pytest.raises(CorruptSavepointError, match="commit lock is a symbolic link"):
        write_seeds(sp, inline_bytes=0, overwrite=True)
    with pytest.raises(CorruptSavepointError, match="commit lock is a symbolic link"):
        remove_unreferenced_files(sp, older_than=0)
    assert not victim.exists()
    assert ((sp / "_manifest").read_bytes(), sorted(os.listdir(sp / "data"))) == before
    assert verify(Savepoint.open(sp)).ok


def test_an_io_error_is_a_storage_error_not_corruption(tmp_path, monkeypatch, capsys):
    """Issue 9 item 22: EIO opening a data file was reported as a corrupt savepoint (3)."""
    write_seeds(tmp_path / "sp", inline_bytes=0)
    real_open = os.open

    def eio_on_data_files(path, *args, **kwargs):
        if str(path).endswith(".svd"):
            raise OSError(errno.EIO, "Input/output error", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", eio_on_data_files)
    sp = Savepoint.open(tmp_path / "sp")
    with pytest.raises(StorageError, match="Input/output error") as info:
        list(sp.operator("kafka-source").list_state("offsets").partition(0))
    assert not isinstance(info.value, CorruptSavepointError) and info.value.exit_code == 8
    with pytest.raises(StorageError):
        verify(sp)
    assert main(["verify", str(tmp_path / "sp"), "--json"]) == 8
    assert json.loads(capsys.readouterr().out)["type"] == "StorageError"
