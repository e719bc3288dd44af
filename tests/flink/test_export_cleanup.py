"""An export to Flink killed before it published leaves state files nothing names:
``pyref clean`` deletes those (and only those) once they are old enough, and an export
never publishes a state file that a cleanup may have taken (pyref/flink/writer/cleanup.py)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pyref.cli import main as cli
from pyref.errors import ConcurrentWriteError, InvalidArgumentError, SavepointError
from pyref.flink import FlinkSavepoint, export_savepoint
from pyref.flink.writer import export as export_module
from pyref.flink.writer.cleanup import is_export_directory, remove_abandoned_export_files
from pyref.flink.writer.directory import EXPORT_FILE_NAME
from pyref.storage import LocalIO, typed_os_error
from pyref.testing import write_seeds

DAY = 24 * 3600.0
#: Exports the seeds to argv[2], SIGKILLing itself once argv[3] state files are complete.
KILLED_EXPORT = """
import os, signal, sys
from pyref.flink import export_savepoint
from pyref.flink.writer import directory

closed, close = [0], directory.StateStream.close
def close_then_die(self):
    ref = close(self)
    closed[0] += 1
    if closed[0] == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)
    return ref
directory.StateStream.close = close_then_die
export_savepoint(sys.argv[1], sys.argv[2], flink_version="2.3", inline_bytes=0, overwrite=True)
"""


def killed_export(src, dst, after: int) -> None:
    proc = subprocess.run([sys.executable, "-c", KILLED_EXPORT, str(src), str(dst), str(after)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def files(path) -> set[str]:
    return set(os.listdir(path))


@pytest.fixture
def seeds(tmp_path):
    write_seeds(tmp_path / "seeds", windowed=True)
    return tmp_path / "seeds"


def test_a_killed_first_export_leaves_files_clean_deletes(seeds, tmp_path):
    dst = tmp_path / "flink"
    killed_export(seeds, dst, after=2)
    left = files(dst)
    assert len(left) == 2 and all(EXPORT_FILE_NAME.fullmatch(n) for n in left) and "_metadata" not in left
    assert is_export_directory(dst)
    young = remove_abandoned_export_files(dst)  # written seconds ago: may be an export still at work
    assert young.deleted == [] and len(young.kept_recent) == 2 and files(dst) == left
    cleaned = remove_abandoned_export_files(dst, now=time.time() + DAY)
    assert len(cleaned.deleted) == 2 and cleaned.deleted_bytes > 0 and files(dst) == set()
    export_savepoint(seeds, dst, flink_version="2.3", inline_bytes=0)
    assert FlinkSavepoint.open(dst).operators


def test_a_killed_overwrite_keeps_the_savepoint_and_clean_keeps_its_files(seeds, tmp_path):
    dst = tmp_path / "flink"
    export_savepoint(seeds, dst, flink_version="2.3", inline_bytes=0)
    published = files(dst)
    metadata = (dst / "_metadata").read_bytes()
    foreign = dst / "0b6c9f4e-8a1d-4c1e-9e55-3f2d7a9b1c00"  # a file Flink wrote (a bare UUID): never ours
    foreign.write_bytes(b"flink's")
    killed_export(seeds, dst, after=3)
    abandoned = files(dst) - published - {foreign.name}
    assert len(abandoned) == 3 and (dst / "_metadata").read_bytes() == metadata

    assert cli(["clean", str(dst), "--dry-run", "--older-than", "0", "--json"]) == 0
    cleaned = remove_abandoned_export_files(dst, now=time.time() + DAY)
    assert {os.path.basename(p) for p in cleaned.deleted} == abandoned
    assert files(dst) == published | {foreign.name}
    assert FlinkSavepoint.open(dst).operators  # every file _metadata names is still there


def test_clean_on_an_export_directory_from_the_command_line(seeds, tmp_path, capsys):
    dst = tmp_path / "flink"
    killed_export(seeds, dst, after=1)
    capsys.readouterr()
    assert cli(["clean", str(dst), "--dry-run", "--older-than", "0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dry_run"] and len(report["deleted"]) == 1 and len(files(dst)) == 1
    # Without a lock between an export and a cleanup, only the age rule keeps an export's files safe.
    with pytest.raises(InvalidArgumentError, match="below"):
        remove_abandoned_export_files(dst, older_than=3600)


def test_clean_takes_an_exports_metadata_file_as_its_directory(seeds, tmp_path, capsys):
    """As inspect, verify and import-flink do: a user hands the _metadata they see."""
    dst = tmp_path / "flink"
    export_savepoint(seeds, dst, flink_version="2.3", inline_bytes=0)
    stray = dst / "pyref-0123456789ab-0b6c9f4e-8a1d-4c1e-9e55-3f2d7a9b1c00"  # as a killed export leaves one
    stray.write_bytes(b"abandoned")
    capsys.readouterr()
    assert cli(["clean", str(dst / "_metadata"), "--dry-run", "--older-than", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["deleted"] == [str(stray)]


def test_an_export_whose_state_file_vanished_publishes_nothing(seeds, tmp_path, monkeypatch):
    dst = tmp_path / "flink"
    publish = export_module.publish

    def publish_after_a_cleanup(source, plan, directory, handles):
        victim = next(h.stream.name for h in handles.values() if not h.stream.inline)
        os.remove(os.path.join(directory.path, victim))
        return publish(source, plan, directory, handles)

    monkeypatch.setattr(export_module, "publish", publish_after_a_cleanup)
    with pytest.raises(ConcurrentWriteError, match="is missing"):
        export_savepoint(seeds, dst, flink_version="2.3", inline_bytes=0)
    assert not dst.exists()


def test_an_export_never_publishes_files_a_cleanup_may_take(seeds, tmp_path, monkeypatch):
    dst = tmp_path / "flink"
    publish = export_module.publish

    def publish_much_later(source, plan, directory, handles):
        long_ago = time.time() - DAY
        for h in handles.values():
            if not h.stream.inline:
                os.utime(os.path.join(directory.path, h.stream.name), (long_ago, long_ago))
        return publish(source, plan, directory, handles)

    monkeypatch.setattr(export_module, "publish", publish_much_later)
    with pytest.raises(ConcurrentWriteError, match="hours ago"):
        export_savepoint(seeds, dst, flink_version="2.3", inline_bytes=0)
    assert not dst.exists()


def test_a_pyref_savepoint_is_not_cleaned_as_an_export(seeds):
    assert not is_export_directory(seeds)


def old_file(path, data: bytes = b"left behind") -> None:
    path.write_bytes(data)
    long_ago = time.time() - 2 * DAY
    os.utime(path, (long_ago, long_ago))


ABANDONED = "pyref-0123456789ab-0b6c9f4e-8a1d-4c1e-9e55-3f2d7a9b1c00"


def test_a_planted_link_out_of_the_directory_stops_clean_and_nothing_is_deleted(seeds, tmp_path):
    """A link named as an export names its files, leading outside: clean refuses by name before it
    deletes anything; the file it points at and the savepoint stay as they were."""
    dst = tmp_path / "flink"
    export_savepoint(seeds, dst, flink_version="2.3", inline_bytes=0)
    published = files(dst)
    old_file(dst / "pyref-0123456789ab-1b6c9f4e-8a1d-4c1e-9e55-3f2d7a9b1c00")  # a genuine leftover
    outside = tmp_path / "outside"
    old_file(outside, b"someone else's")
    (dst / ABANDONED).symlink_to(outside)
    with pytest.raises(SavepointError, match="outside the savepoint directory through a symlink") as err:
        remove_abandoned_export_files(dst, now=time.time() + DAY)
    assert ABANDONED in str(err.value)
    assert outside.read_bytes() == b"someone else's" and len(files(dst) - published) == 2
    assert FlinkSavepoint.open(dst).operators


def test_an_io_error_while_deleting_is_typed_and_keeps_the_savepoint(seeds, tmp_path, monkeypatch):
    dst = tmp_path / "flink"
    export_savepoint(seeds, dst, flink_version="2.3", inline_bytes=0)
    published = files(dst)
    killed_export(seeds, dst, after=3)
    unlink, calls = os.unlink, []

    def failing_unlink(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error", path)
        return unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", failing_unlink)
    with pytest.raises(SavepointError, match="cannot delete the file"):
        remove_abandoned_export_files(dst, now=time.time() + DAY)
    monkeypatch.undo()
    assert len(files(dst) - published) == 2  # one deleted, the failed one and the next kept
    assert FlinkSavepoint.open(dst).operators
    remove_abandoned_export_files(dst, now=time.time() + DAY)  # run again: the rest goes
    assert files(dst) == published


def test_an_export_publishing_while_clean_looks_stops_clean(seeds, tmp_path):
    """Between finding the old files and deleting them, an export publishes: clean deletes nothing."""
    dst = tmp_path / "flink"
    killed_export(seeds, dst, after=2)
    left = files(dst)

    class PublishingMeanwhile(LocalIO):
        published = False

        def stat(self, rel):
            if not self.published and EXPORT_FILE_NAME.fullmatch(rel):
                self.published = True
                export_savepoint(seeds, dst, flink_version="2.3", inline_bytes=0)
            return super().stat(rel)

    with pytest.raises(ConcurrentWriteError, match="nothing was deleted"):
        remove_abandoned_export_files(PublishingMeanwhile(str(dst)), now=time.time() + DAY)
    assert left < files(dst) and FlinkSavepoint.open(dst).operators


def test_an_unreadable_metadata_makes_clean_delete_nothing(tmp_path):
    """Which files a damaged _metadata names is unknown: clean refuses rather than guess."""
    dst = tmp_path / "flink"
    dst.mkdir()
    (dst / "_metadata").write_bytes(b"\x00\x00\x00\x07garbage")
    old_file(dst / ABANDONED)
    with pytest.raises(SavepointError, match="cannot tell which state files _metadata names"):
        remove_abandoned_export_files(dst, now=time.time() + DAY)
    assert (dst / ABANDONED).exists()


def test_only_export_named_files_of_the_directory_itself_are_candidates(tmp_path):
    """Not Flink's files, not a name that only resembles an export's, not files in subdirectories."""
    dst = tmp_path / "flink"
    (dst / "sub").mkdir(parents=True)
    for name in (ABANDONED, ABANDONED + ".tmp", "pyref-0123456789ab-x", "0b6c9f4e-8a1d-4c1e-9e55-3f2d7a9b1c00",
                 f"sub/{ABANDONED}"):
        old_file(dst / name)
    cleaned = remove_abandoned_export_files(dst, now=time.time() + DAY)
    assert [os.path.basename(p) for p in cleaned.deleted] == [ABANDONED]
    assert len(files(dst)) == 4 and (dst / "sub" / ABANDONED).exists()


def test_an_io_error_checking_the_state_files_publishes_nothing_and_cleans_up(seeds, tmp_path, monkeypatch):
    """The export's last check (every state file there, whole, young) fails on the disk: nothing is
    published and the export's own files are deleted, as for any failed export."""
    dst = tmp_path / "flink"
    publish, stat = export_module.publish, LocalIO.stat
    armed = []

    def publish_on_a_failing_disk(source, plan, directory, handles):
        armed.append(True)
        return publish(source, plan, directory, handles)

    def failing_stat(self, rel):
        if armed and EXPORT_FILE_NAME.fullmatch(rel):  # as LocalIO.stat reports a failing disk
            raise typed_os_error(OSError(errno.EIO, "Input/output error"), "cannot stat the file", rel)
        return stat(self, rel)

    monkeypatch.setattr(export_module, "publish", publish_on_a_failing_disk)
    monkeypatch.setattr(LocalIO, "stat", failing_stat)
    with pytest.raises(SavepointError, match="cannot stat the file"):
        export_savepoint(seeds, dst, flink_version="2.3", inline_bytes=0)
    assert not dst.exists()
