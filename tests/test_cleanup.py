"""Cleaning up after interrupted writers: only old, unreferenced files of this
savepoint go, and nothing goes if a writer committed meanwhile."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from pyref import (
    ConcurrentWriteError,
    InvalidArgumentError,
    Savepoint,
    SavepointNotFoundError,
    SavepointWriter,
    rescale,
)
from pyref.cleanup import remove_unreferenced_files
from pyref.cli import main
from pyref.inspection import verify
from pyref.io import LocalIO
from pyref.serializers import Int64, String
from pyref.testing import SEED_COUNTS, write_seeds

DAY = 24 * 3600


def interrupted_writer(path) -> list[str]:
    """Data files of a writer that wrote its chunks and died before its commit."""
    before = set(os.listdir(path / "data"))
    w = SavepointWriter(str(path), overwrite=True, inline_bytes=0)
    w.add_operator("url-counter", parallelism=1, key_serializer=String()).keyed_state("count", Int64()).add(
        [f"https://example.com/{i}" for i in range(1000)], list(range(1000)))
    w.build_manifest()  # files written and closed; no commit, no abort
    left = sorted(set(os.listdir(path / "data")) - before)
    assert left, "the interrupted writer left no files"
    return left


def age(path, names, seconds) -> None:
    then = time.time() - seconds
    for name in names:
        os.utime(path / "data" / name, (then, then))


def counts(path) -> dict:
    return dict(Savepoint.open(path).operator("url-counter").keyed_state("count").items())


@pytest.fixture
def savepoint(tmp_path):
    path = tmp_path / "sp"
    write_seeds(path, inline_bytes=0)
    return path


@pytest.mark.parametrize("uri", [False, True], ids=["local", "arrow"])
def test_old_leftovers_are_deleted_and_the_savepoint_is_untouched(savepoint, uri):
    own = sorted(os.listdir(savepoint / "data"))
    leftovers = interrupted_writer(savepoint)
    age(savepoint, leftovers, 2 * DAY)
    assert any("unreferenced" in w for w in verify(Savepoint.open(savepoint)).warnings)

    report = remove_unreferenced_files(f"file://{savepoint}" if uri else savepoint)

    assert [os.path.basename(p) for p in report.deleted] == leftovers and report.kept_recent == []
    assert report.deleted_bytes > 0
    assert sorted(os.listdir(savepoint / "data")) == own
    result = verify(Savepoint.open(savepoint))
    assert result.ok and result.warnings == []
    assert counts(savepoint) == SEED_COUNTS


def test_recent_leftovers_are_kept_and_a_dry_run_deletes_nothing(savepoint):
    old, recent = interrupted_writer(savepoint), interrupted_writer(savepoint)
    age(savepoint, old, 2 * DAY)
    age(savepoint, recent, DAY - 60)

    dry = remove_unreferenced_files(savepoint, dry_run=True)
    assert [os.path.basename(p) for p in dry.deleted] == old
    assert [os.path.basename(p) for p in dry.kept_recent] == recent
    assert set(old) | set(recent) <= set(os.listdir(savepoint / "data"))

    done = remove_unreferenced_files(savepoint)
    assert done.deleted == dry.deleted and done.kept_recent == dry.kept_recent
    left = set(os.listdir(savepoint / "data"))
    assert set(recent) <= left and not set(old) & left
    assert remove_unreferenced_files(savepoint, older_than=0).kept_recent == []  # now the recent ones too
    assert verify(Savepoint.open(savepoint)).warnings == []


class CommitWhileListing(LocalIO):
    """Storage on which another writer replaces the savepoint while cleanup lists data/."""

    def list_files(self, rel_dir):
        found = super().list_files(rel_dir)
        write_seeds(self.root, inline_bytes=0, overwrite=True)
        return found


def test_a_commit_during_cleanup_deletes_nothing(savepoint):
    leftovers = interrupted_writer(savepoint)
    age(savepoint, leftovers, 2 * DAY)
    with pytest.raises(ConcurrentWriteError, match="nothing was deleted"):
        remove_unreferenced_files(CommitWhileListing(str(savepoint)))
    assert set(leftovers) <= set(os.listdir(savepoint / "data"))
    assert counts(savepoint) == SEED_COUNTS


def test_a_writer_holding_the_commit_lock_stops_cleanup(savepoint):
    leftovers = interrupted_writer(savepoint)
    age(savepoint, leftovers, 2 * DAY)
    with LocalIO(str(savepoint)).commit_lock(), pytest.raises(ConcurrentWriteError):
        remove_unreferenced_files(savepoint)
    assert set(leftovers) <= set(os.listdir(savepoint / "data"))


def test_only_files_directly_in_data_are_candidates(savepoint, tmp_path):
    nested = savepoint / "data" / "not-a-file"
    nested.mkdir()
    (nested / "inside").write_bytes(b"x")
    outside = savepoint / "notes.txt"
    outside.write_bytes(b"kept")
    assert remove_unreferenced_files(savepoint, older_than=0).deleted == []
    assert (nested / "inside").exists() and outside.exists()


def test_names_no_savepoint_may_list_are_left_not_refused(savepoint):
    """A file another tool copied into data/ under a name no manifest may list ('x:y', 'a\\b') made
    every clean fail as if the savepoint were corrupt, deleting nothing."""
    for name in ("x:y", "a\\b", "old.svd"):
        (savepoint / "data" / name).write_bytes(b"x")
    age(savepoint, ["x:y", "a\\b", "old.svd"], 3600)
    assert remove_unreferenced_files(savepoint, older_than=0).deleted == [str(savepoint / "data" / "old.svd")]
    assert (savepoint / "data" / "x:y").exists() and (savepoint / "data" / "a\\b").exists()


def test_files_of_a_base_are_never_deleted(savepoint, tmp_path):
    shallow = tmp_path / "sp4"
    rescale(savepoint, shallow, 4)  # refers to the files of `savepoint`
    for path in (shallow, savepoint):
        report = remove_unreferenced_files(path, older_than=0)
        assert report.deleted == []
    assert counts(shallow) == SEED_COUNTS and verify(Savepoint.open(shallow)).ok


def test_errors(savepoint, tmp_path):
    with pytest.raises(InvalidArgumentError, match="older_than"):
        remove_unreferenced_files(savepoint, older_than=-1)
    with pytest.raises(SavepointNotFoundError):
        remove_unreferenced_files(tmp_path / "nothing-here")


def test_command_line(savepoint, capsys):
    leftovers = interrupted_writer(savepoint)
    age(savepoint, leftovers, 3 * 3600)
    assert main(["clean", str(savepoint), "--older-than", "4", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete 0 unreferenced files" in out and out.count("kept (too recent)") == len(leftovers)

    assert main(["clean", str(savepoint), "--older-than", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["deleted"]) == len(leftovers) and report["dry_run"] is False
    assert not set(leftovers) & set(os.listdir(savepoint / "data"))
    assert main(["clean", str(savepoint / "missing")]) == 4


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), -1.0, "24", None, True])
def test_older_than_must_be_a_finite_number_of_seconds(savepoint, bad):
    """Issue 9 item 4: nan passed the `< 0` check and made every file old enough."""
    leftovers = interrupted_writer(savepoint)
    with pytest.raises(InvalidArgumentError, match="older_than"):
        remove_unreferenced_files(savepoint, older_than=bad)
    assert set(leftovers) <= set(os.listdir(savepoint / "data"))


@pytest.mark.parametrize("hours", ["nan", "inf", "-1", "1e3", "١"])
def test_the_command_line_refuses_hours_that_are_not_a_finite_number(savepoint, capsys, hours):
    leftovers = interrupted_writer(savepoint)
    assert main(["clean", str(savepoint), "--older-than", hours, "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["type"] == "InvalidArgumentError"
    assert set(leftovers) <= set(os.listdir(savepoint / "data"))


def test_a_writer_whose_files_clean_deleted_refuses_to_publish(savepoint):
    """Issue 9 item 4: a writer running longer than --older-than lost its files to clean,
    did not notice, committed an unreadable savepoint and deleted the previous one."""
    before = (savepoint / "_manifest").read_bytes()
    w = SavepointWriter(str(savepoint), overwrite=True, inline_bytes=0, chunk_bytes=4096, buffer_bytes=4096,
                        file_bytes=8192)
    state = w.add_operator("url-counter", parallelism=1, key_serializer=String()).keyed_state("count", Int64())
    state.add([f"https://example.com/{i}" for i in range(3000)], list(range(3000)))
    mine = set(os.listdir(savepoint / "data")) - {os.path.basename(f.path) for f in
                                                 Savepoint.open(savepoint).manifest.data_files}
    age(savepoint, mine, 2 * DAY)  # a writer that has been running for two days
    assert remove_unreferenced_files(savepoint).deleted  # the default threshold takes its closed files
    with pytest.raises(ConcurrentWriteError, match="missing.*nothing was committed"):
        w.commit()
    assert (savepoint / "_manifest").read_bytes() == before
    assert counts(savepoint) == SEED_COUNTS and verify(Savepoint.open(savepoint)).ok


class SlowCleanup(LocalIO):
    """Storage on which cleanup takes a while to delete each file (it holds the lock meanwhile)."""

    def __init__(self, root, holding: threading.Event) -> None:
        super().__init__(root)
        self.holding = holding

    def delete(self, rel):
        self.holding.set()
        time.sleep(0.5)
        super().delete(rel)


def _clean_in_background(path) -> tuple[threading.Thread, list]:
    holding, result = threading.Event(), []
    thread = threading.Thread(target=lambda: result.append(remove_unreferenced_files(SlowCleanup(path, holding))))
    thread.start()
    assert holding.wait(10), "cleanup never took the lock"
    return thread, result


def test_a_writer_waits_for_clean_holding_the_commit_lock(savepoint):
    """Issue 9 item 10: while clean held the lock, a committing writer failed at once with
    "another writer is committing" and deleted all its data files."""
    age(savepoint, interrupted_writer(savepoint), 2 * DAY)
    w = SavepointWriter(str(savepoint), overwrite=True, inline_bytes=0)
    w.add_operator("url-counter", parallelism=1, key_serializer=String()).keyed_state("count", Int64()).add(
        ["/page/1"], [41])
    thread, cleaned = _clean_in_background(savepoint)
    manifest = w.commit().manifest  # waits for the lock instead of failing
    thread.join()
    assert cleaned and cleaned[0].deleted
    assert counts(savepoint) == {"/page/1": 41}
    assert {f.path for f in manifest.data_files} == {f"data/{n}" for n in os.listdir(savepoint / "data")}


def test_a_writer_that_gives_up_waiting_names_what_holds_the_lock(savepoint):
    age(savepoint, interrupted_writer(savepoint), 2 * DAY)
    before = (savepoint / "_manifest").read_bytes()
    w = SavepointWriter(LocalIO(savepoint, lock_wait=0.1), overwrite=True, inline_bytes=0)
    w.add_operator("op", parallelism=1).list_state("s", Int64()).add(0, [1])
    thread, _ = _clean_in_background(savepoint)
    with pytest.raises(ConcurrentWriteError, match=r"held by pyref clean \(pid \d+ .*waited 0.1 s") as info:
        w.commit()
    thread.join()
    assert info.value.path.endswith(".lock")
    assert (savepoint / "_manifest").read_bytes() == before and counts(savepoint) == SEED_COUNTS
    assert verify(Savepoint.open(savepoint)).warnings == []  # the writer removed its files


def test_cleanup_never_waits_for_a_writer_and_says_so(savepoint):
    leftovers = interrupted_writer(savepoint)
    age(savepoint, leftovers, 2 * DAY)
    with LocalIO(savepoint).commit_lock("a test writer"):
        with pytest.raises(ConcurrentWriteError, match="held by a test writer.*pyref clean gave up"):
            remove_unreferenced_files(savepoint)
    assert set(leftovers) <= set(os.listdir(savepoint / "data"))
