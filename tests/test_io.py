"""Storage: local files with fsync/rename/lock, and any pyarrow.fs filesystem."""

from __future__ import annotations

import os

import pytest

from pyref.testing import write_seeds
from pyref import CorruptSavepointError, Savepoint, SavepointWriter, rescale
from pyref.io import ArrowIO, LocalIO, check_relative_path, open_io
from pyref.serializers import Int64


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


def test_symlink_out_of_the_savepoint_is_refused(tmp_path):
    write_seeds(tmp_path / "sp", inline_bytes=0)
    data_file = next((tmp_path / "sp" / "data").iterdir())
    outside = tmp_path / "outside.svd"
    os.replace(data_file, outside)
    os.symlink(outside, data_file)
    with pytest.raises(CorruptSavepointError, match="outside the savepoint directory"):
        list(Savepoint.open(tmp_path / "sp").operator("kafka-source").list_state("offsets").partition(0))


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
