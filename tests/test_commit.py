"""Atomic commit: a reader sees nothing or the complete savepoint; an existing
savepoint is never damaged by a failed write."""

from __future__ import annotations

import os

import pytest

from pyref.testing import write_seeds
from pyref import ConcurrentWriteError, InvalidArgumentError, Savepoint, SavepointNotFoundError, SavepointWriter
from pyref.serializers import Int64


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
