"""Atomic commit: a reader sees nothing or the complete savepoint; an existing
savepoint is never damaged by a failed write."""

from __future__ import annotations

import errno
import os
import shutil

import pytest

from pyref import (
    ConcurrentWriteError,
    CorruptSavepointError,
    InvalidArgumentError,
    Savepoint,
    SavepointNotFoundError,
    SavepointWriter,
)
from pyref.errors import StorageError
from pyref.inspection import verify
from pyref.manifest import decode_manifest, encode_manifest
from pyref.redistribution import DistributionMode
from pyref.serializers import Int64, String
from pyref.testing import DiskFullOnce, write_seeds


def _files(path):
    return sorted(p.name for p in (path / "data").iterdir()) if (path / "data").exists() else []


def test_existing_savepoint_is_refused_without_overwrite(seeds):
    with pytest.raises(InvalidArgumentError, match="already exists"):
        SavepointWriter(str(seeds))


def test_failed_write_leaves_previous_savepoint_intact_and_no_new_files(tmp_path):
    path = tmp_path / "sp"
    write_seeds(path, inline_bytes=0)
    before = (path / "_manifest").read_bytes(), _files(path)
    with pytest.raises(RuntimeError):
        with SavepointWriter(str(path), overwrite=True, inline_bytes=0, chunk_bytes=4096) as w:
            w.add_operator("op", parallelism=1).list_state("s", Int64()).add(0, range(100_000))
            assert len(_files(path)) > len(before[1])  # data reached the disk before the failure
            raise RuntimeError("job failed mid-write")
    assert ((path / "_manifest").read_bytes(), _files(path)) == before
    assert sorted(Savepoint.open(path).restore_plan(1).subtask("kafka-source", 0).list_state("offsets")) == [
        100, 101, 200, 201]


def test_overwrite_replaces_atomically_and_deletes_replaced_files(tmp_path):
    path = tmp_path / "sp"
    write_seeds(path, inline_bytes=0)
    old_files = _files(path)
    with SavepointWriter(str(path), overwrite=True, inline_bytes=0) as w:
        w.add_operator("op", parallelism=1).list_state("s", Int64()).add(0, [1, 2])
    assert not set(old_files) & set(_files(path))
    assert [o.operator_id for o in Savepoint.open(path).operators] == ["op"]


def test_directory_without_manifest_is_not_a_savepoint(tmp_path):
    (tmp_path / "sp" / "data").mkdir(parents=True)
    (tmp_path / "sp" / "data" / "orphan.svd").write_bytes(b"left by a killed writer")
    with pytest.raises(SavepointNotFoundError):
        Savepoint.open(tmp_path / "sp")


def test_racing_writers_end_with_one_savepoint_or_a_clear_error(tmp_path):
    path = str(tmp_path / "sp")
    first, second = SavepointWriter(path), SavepointWriter(path)
    first.add_operator("first", parallelism=1).list_state("s", Int64()).add(0, [1])
    second.add_operator("second", parallelism=1).list_state("s", Int64()).add(0, [2])
    first.commit()
    with pytest.raises(ConcurrentWriteError):
        second.commit()
    assert [o.operator_id for o in Savepoint.open(path).operators] == ["first"]
    assert len(os.listdir(os.path.join(path, "data")) if os.path.exists(os.path.join(path, "data")) else []) <= 1


def test_writer_cannot_be_used_after_commit(tmp_path):
    w = SavepointWriter(str(tmp_path / "sp"))
    st = w.add_operator("op", parallelism=1).list_state("s", Int64())
    w.commit()
    with pytest.raises(InvalidArgumentError):
        st.add(0, [1])


def test_an_unknown_commit_outcome_keeps_the_data_files(tmp_path, monkeypatch):
    """If the manifest write fails after it may have landed, deleting data would break the savepoint."""
    path = tmp_path / "sp"

    def fails_after_rename(self, data, expected_previous):
        (path / "_manifest").write_bytes(data)
        raise OSError("connection reset while confirming the write")

    monkeypatch.setattr("pyref.io.LocalIO.commit_manifest", fails_after_rename)
    with pytest.raises(OSError):
        write_seeds(path, inline_bytes=0)
    monkeypatch.undo()
    assert sorted(Savepoint.open(path).restore_plan(1).subtask("kafka-source", 0).list_state("offsets")) == [
        100, 101, 200, 201]


def _offsets(path) -> list[int]:
    return sorted(Savepoint.open(path).restore_plan(1).subtask("kafka-source", 0).list_state("offsets"))


def test_a_writer_that_failed_inside_add_refuses_to_commit(tmp_path):
    """Issue 9 item 2: a caller that caught the ENOSPC of add() and went on committed a
    savepoint with a CRC mismatch, and overwrite=True deleted the previous good one."""
    path = tmp_path / "sp"
    write_seeds(path, inline_bytes=0)
    before = (path / "_manifest").read_bytes(), _files(path)
    w = SavepointWriter(DiskFullOnce(path, room=20_000), overwrite=True, inline_bytes=0, codec="none",
                        chunk_bytes=4096, buffer_bytes=4096)
    state = w.add_operator("op", parallelism=1).list_state("s", Int64())
    failures = []
    for start in range(0, 20_000, 1000):
        try:
            state.add(0, range(start, start + 1000))
        except (StorageError, InvalidArgumentError) as exc:
            failures.append(type(exc))  # the caller "handles" it and goes on
    assert failures[0] is StorageError and set(failures[1:]) <= {InvalidArgumentError}
    assert w.status == "failed"
    with pytest.raises(InvalidArgumentError, match="failed earlier.*StorageError"):
        w.commit()
    assert ((path / "_manifest").read_bytes(), _files(path)) == before
    assert _offsets(path) == [100, 101, 200, 201]


def test_a_failed_writer_in_a_with_block_that_swallowed_the_error_commits_nothing(tmp_path):
    path = tmp_path / "sp"
    write_seeds(path, inline_bytes=0)
    before = (path / "_manifest").read_bytes()
    with pytest.raises(InvalidArgumentError, match="nothing was committed"):
        with SavepointWriter(DiskFullOnce(path, room=100), overwrite=True, inline_bytes=0, codec="none",
                             chunk_bytes=1024, buffer_bytes=1024) as w:
            try:
                w.add_operator("op", parallelism=1).list_state("s", Int64()).add(0, range(10_000))
            except StorageError:
                pass
    assert (path / "_manifest").read_bytes() == before and _offsets(path) == [100, 101, 200, 201]


def test_an_overwritten_manifest_listing_reserved_names_never_deletes_them(tmp_path):
    """Issue 9 item 3: a replaced manifest listing _manifest as a data file made the cleanup
    after the commit delete the *new* _manifest."""
    path = tmp_path / "sp"
    write_seeds(path, inline_bytes=0)
    m, _ = decode_manifest((path / "_manifest").read_bytes(), path="x")
    (path / "notes").mkdir()
    (path / "notes" / "keep.txt").write_bytes(b"mine")
    for listed in ("_manifest", ".lock", "notes/keep.txt", "data"):
        m.data_files.add(path=listed, size=1)
    (path / "_manifest").write_bytes(encode_manifest(m))
    (path / ".lock").write_bytes(b"")
    write_seeds(path, inline_bytes=0, overwrite=True)
    assert _offsets(path) == [100, 101, 200, 201]  # the new manifest is there
    assert (path / ".lock").exists() and (path / "notes" / "keep.txt").read_bytes() == b"mine"
    assert (path / "data").is_dir()


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_an_io_error_on_a_new_data_files_first_write_is_reported_and_cleaned_up(tmp_path, monkeypatch):
    """Issue 9 item 19: EIO on the first write of a data file raised IndexError from the
    abort, which hid the real error, leaked the descriptor and left the file."""
    real_write = os.write

    def fails_on_data_files(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".svd"):
            raise OSError(errno.EIO, "Input/output error")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", fails_on_data_files)
    fds = _open_fds()
    with pytest.raises(StorageError, match="Input/output error") as info:
        write_seeds(tmp_path / "sp", inline_bytes=0)
    assert info.value.exit_code == 8 and ".svd" in info.value.path
    monkeypatch.undo()
    assert _files(tmp_path / "sp") == [] and _open_fds() == fds
    assert not (tmp_path / "sp" / "_manifest").exists()


@pytest.mark.parametrize("call", [
    lambda w, op, st: w.add_operator("\ud800", parallelism=1),
    lambda w, op, st: w.add_operator("op2", parallelism=1, name="\udfff"),
    lambda w, op, st: op.list_state("\udc00", Int64()),
    lambda w, op, st: op.keyed_state(7, Int64()),
    lambda w, op, st: op.keyed_state("k", Int64()).add(["\ud800"], [1]),
    lambda w, op, st: op.list_state("m", Int64(), mode="SPLIT"),
    lambda w, op, st: op.list_state("m", Int64(), mode=9),
    lambda w, op, st: SavepointWriter(str(w.io.root) + "-2", codec=7),
    lambda w, op, st: SavepointWriter(str(w.io.root) + "-2", codec=True),
    lambda w, op, st: st.add("0", [1]),
    lambda w, op, st: st.add(0.0, [1]),
    lambda w, op, st: st.add(True, [1]),
    lambda w, op, st: op.keyed_state("k2", Int64()).add(["a"], [1], subtask="0"),
], ids=["surrogate-operator", "surrogate-operator-name", "surrogate-state", "state-name-not-str",
        "surrogate-key", "unknown-mode-name", "unknown-mode-number", "codec-7", "codec-bool", "subtask-str",
        "subtask-float", "subtask-bool", "keyed-subtask-str"])
def test_api_misuse_is_a_typed_error_and_leaves_the_writer_usable(tmp_path, call):
    """Issue 9 item 21: these raised ValueError, TypeError or UnicodeEncodeError, or were
    accepted and failed at commit."""
    w = SavepointWriter(str(tmp_path / "sp"))
    op = w.add_operator("op", parallelism=2, key_serializer=String())
    st = op.list_state("s", Int64())
    with pytest.raises(InvalidArgumentError):
        call(w, op, st)
    st.add(1, [5])
    w.commit()
    assert list(Savepoint.open(tmp_path / "sp").operator("op").list_state("s").partition(1)) == [5]


def test_mode_names_are_accepted(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", parallelism=2).list_state("u", Int64(), mode="union").add(0, [1])
    assert Savepoint.open(tmp_path / "sp").operator("op").list_state("u").mode is DistributionMode.UNION


def test_a_closed_writer_takes_no_more_states(tmp_path):
    """Issue 9 item 21: list_state() after commit was accepted and silently never written."""
    w = SavepointWriter(str(tmp_path / "sp"))
    op = w.add_operator("op", parallelism=1, key_serializer=String())
    w.commit()
    for late in (lambda: op.list_state("late", Int64()), lambda: op.keyed_state("late", Int64()),
                 lambda: w.add_operator("late", parallelism=1), lambda: w.build_manifest(), lambda: w.commit()):
        with pytest.raises(InvalidArgumentError, match="committed"):
            late()


def test_a_reader_racing_an_overwrite_is_told_the_savepoint_was_replaced(tmp_path):
    """Issue 9 item 22: a reader whose savepoint was replaced meanwhile got "no savepoint"
    (exit 4) or "corrupt" (exit 3) depending on timing."""
    path = tmp_path / "sp"
    with SavepointWriter(str(path), inline_bytes=0, chunk_bytes=64, buffer_bytes=64) as w:
        w.add_operator("op", parallelism=1).list_state("s", Int64()).add(0, range(100))
    reader = Savepoint.open(path)
    state = reader.operator("op").list_state("s")
    first, *rest = state.proto.partitions[0].ranges
    assert list(state.iter_ranges([first]))  # the data file's size is checked now, not again
    write_seeds(path, overwrite=True, inline_bytes=0)  # deletes the files the reader uses
    with pytest.raises(ConcurrentWriteError, match="replaced .* while reading") as info:
        list(state.iter_ranges(rest))
    assert info.value.exit_code == 7
    with pytest.raises(ConcurrentWriteError, match="replaced"):
        verify(reader)
    shutil.rmtree(path)
    with pytest.raises(ConcurrentWriteError, match="deleted while reading"):
        list(state.iter_ranges(rest))


def test_a_missing_data_file_of_an_unchanged_savepoint_is_corrupt_not_missing(tmp_path):
    path = tmp_path / "sp"
    write_seeds(path, inline_bytes=0)
    for f in (path / "data").iterdir():
        f.unlink()
    with pytest.raises(CorruptSavepointError, match="missing"):
        _offsets(path)
