"""Injected storage faults (spec/security.md §8): the n-th call of each os function a
writer or reader makes on the savepoint fails with EIO, with ENOSPC after a short
write, or with EACCES; writers are driven by a careless caller that catches every error
of ``add()`` and goes on to commit (issue 9 item 2), through the plain path, a symbolic
link and a ``file://`` URL; ``.lock`` is planted as a link, a FIFO and a directory.

After every fault: whatever escaped is a typed SavepointError; the savepoint holds one
complete generation, checked value by value, the new one exactly when ``commit()``
returned; a fault while reading is a StorageError, never "corrupt" or "not found"; no
file descriptor leaks; nothing is created outside the savepoint. At the end, ``clean``
removes every leftover and ``verify`` finds nothing to warn about.

The default tier injects at a stride of the calls; ``-m slow`` at every call.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections import Counter
from contextlib import contextmanager

import numpy as np
import pytest

from pyref import CorruptSavepointError, Savepoint, SavepointError, SavepointWriter, StorageError
from pyref.cleanup import remove_unreferenced_files
from pyref.inspection import verify
from pyref.serializers import Int64

ENTRIES = 600
#: os functions the storage layer calls, and whether they take a path (else a descriptor).
CALLS = {"open": True, "stat": True, "replace": True, "unlink": True, "scandir": True,
         "write": False, "pread": False, "fsync": False, "ftruncate": False}
#: (errno, short): ENOSPC after a short write is what a full disk does to write(2).
FAULTS = [(errno.EIO, False), (errno.ENOSPC, True), (errno.EACCES, False)]


class Injector:
    """Counts the calls of os functions on files under ``root`` and fails the ``fail_at``-th
    call of ``target`` with ``err`` (a write given ``short`` first lands half its bytes)."""

    def __init__(self, root: str, target: str | None = None, fail_at: int = 0, err: int = errno.EIO,
                 short: bool = False) -> None:
        self.root, self.target, self.fail_at, self.err, self.short = root, target, fail_at, err, short
        self.counts: Counter = Counter()
        self.fired = False
        self._lock = threading.Lock()

    def _ours(self, takes_path: bool, arg) -> bool:
        try:
            where = os.fspath(arg) if takes_path else os.readlink(f"/proc/self/fd/{arg}")
        except (TypeError, OSError):
            return False
        return isinstance(where, str) and where.startswith(self.root)

    def _wrap(self, name: str, takes_path: bool, real):
        def call(*args, **kwargs):
            if args and self._ours(takes_path, args[0]):
                with self._lock:
                    self.counts[name] += 1
                    hit = name == self.target and self.counts[name] == self.fail_at
                if hit:
                    self.fired = True
                    if name == "write" and self.short and len(args[1]) > 1:
                        real(args[0], bytes(args[1])[: len(args[1]) // 2])  # lands, then the disk is full
                    raise OSError(self.err, os.strerror(self.err))
            return real(*args, **kwargs)

        return call

    @contextmanager
    def active(self):
        saved = {name: getattr(os, name) for name in CALLS}
        for name, takes_path in CALLS.items():
            setattr(os, name, self._wrap(name, takes_path, saved[name]))
        try:
            yield self
        finally:
            for name, real in saved.items():
                setattr(os, name, real)


def careless_write(location, generation: int) -> bool:
    """Write ``generation`` over ``location``, swallowing every error of add() as a careless
    caller does; True if commit() returned."""
    keys = np.arange(ENTRIES, dtype=np.int64)
    try:
        w = SavepointWriter(location, overwrite=True, inline_bytes=0, codec="none", chunk_bytes=512,
                            buffer_bytes=2048, file_bytes=4096)
        op = w.add_operator("op", parallelism=2, max_parallelism=8, key_serializer=Int64())
        values = op.keyed_state("values", Int64())
        marks = op.list_state("generation", Int64())
        for start in range(0, ENTRIES, 100):
            try:
                values.add(keys[start:start + 100], keys[start:start + 100] + generation * 1_000_000)
            except SavepointError:
                pass  # "handled"
        try:
            marks.add(0, [generation] * 3)
        except SavepointError:
            pass
        w.commit()
        return True
    except SavepointError:
        return False


def generation_at(path) -> int:
    """The one complete generation at ``path``, checked value by value."""
    sp = Savepoint.open(path)
    assert verify(sp).ok
    op = sp.operator("op")
    marks = list(op.list_state("generation").partition(0))
    generation = marks[0]
    assert marks == [generation] * 3
    values = dict(op.keyed_state("values").items())
    assert values == {k: k + generation * 1_000_000 for k in range(ENTRIES)}
    return generation


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _locations(tmp_path):
    """The savepoint directory and the three ways the campaign names it."""
    real = tmp_path / "sp"
    os.symlink("sp", tmp_path / "current")
    return real, {"path": str(real), "link": str(tmp_path / "current"), "url": f"file://{tmp_path}/current"}


def run_write_faults(tmp_path, stride: int) -> Counter:
    real, names = _locations(tmp_path)
    assert careless_write(names["path"], 0)
    census = Injector(str(real))
    with census.active():
        assert careless_write(names["path"], 1)
    current, outcomes, trial = 1, Counter(), 0
    for call, total in sorted(census.counts.items()):
        for n in range(1, total + 1, stride):
            for err, short in FAULTS:
                if short and call != "write":
                    continue
                trial += 1
                new = current + 1
                location = list(names.values())[trial % len(names)]
                fds = _fds()
                injector = Injector(str(real), call, n, err, short)
                with injector.active():
                    committed = careless_write(location, new)  # anything untyped escapes and fails the test
                assert _fds() == fds, f"descriptor leaked: {call}:{n} {errno.errorcode[err]}"
                found = generation_at(real)
                assert found == (new if committed else current), (call, n, errno.errorcode[err], committed)
                assert os.path.islink(tmp_path / "current")
                outcomes[(call, "committed" if committed else "refused")] += 1
                current = found
    remove_unreferenced_files(real, older_than=0)
    assert verify(Savepoint.open(real)).warnings == []
    assert generation_at(real) == current
    return outcomes


def test_write_faults_never_publish_a_damaged_savepoint(tmp_path):
    outcomes = run_write_faults(tmp_path, stride=int(os.environ.get("FAULT_STRIDE_QUICK", 5)))
    print("write faults:", dict(outcomes))
    assert any(k[1] == "refused" for k in outcomes) and any(k[1] == "committed" for k in outcomes)


@pytest.mark.slow
def test_write_faults_at_every_call(tmp_path):
    outcomes = run_write_faults(tmp_path, stride=1)
    print("write faults:", dict(outcomes), "trials:", sum(outcomes.values()))


def run_read_faults(tmp_path, stride: int) -> Counter:
    real, names = _locations(tmp_path)
    assert careless_write(names["path"], 7)
    census = Injector(str(real))
    with census.active():
        generation_at(names["link"])
    outcomes = Counter()
    for call, total in sorted(census.counts.items()):
        for n in range(1, total + 1, stride):
            for err in (errno.EIO, errno.EACCES):
                fds = _fds()
                with Injector(str(real), call, n, err).active():
                    try:
                        generation_at(names["url" if n % 2 else "link"])
                        outcomes["read"] += 1
                    except SavepointError as exc:
                        # The storage failed, the savepoint did not: never "corrupt" or "not found".
                        assert type(exc) is StorageError, (call, n, repr(exc))
                        outcomes["StorageError"] += 1
                assert _fds() == fds
    assert generation_at(real) == 7
    return outcomes


def test_read_faults_are_storage_errors(tmp_path):
    outcomes = run_read_faults(tmp_path, stride=int(os.environ.get("FAULT_STRIDE_QUICK", 5)))
    print("read faults:", dict(outcomes))
    assert outcomes["StorageError"] > 0


@pytest.mark.slow
def test_read_faults_at_every_call(tmp_path):
    print("read faults:", dict(run_read_faults(tmp_path, stride=1)))


@pytest.mark.parametrize("plant", ["link", "dangling-link", "fifo", "directory"])
def test_a_planted_lock_stops_writers_and_clean_and_touches_nothing(tmp_path, plant):
    real, names = _locations(tmp_path)
    assert careless_write(names["path"], 3)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "lock-target"
    if plant == "link":
        victim.write_bytes(b"")
    lock = real / ".lock"
    lock.unlink()
    {"link": lambda: os.symlink(victim, lock), "dangling-link": lambda: os.symlink(victim, lock),
     "fifo": lambda: os.mkfifo(lock), "directory": lambda: lock.mkdir()}[plant]()
    (real / "data" / "leftover.svd").write_bytes(b"left by a killed writer")
    before = sorted(os.listdir(outside)), os.stat(victim).st_mtime if victim.exists() else None
    for location in names.values():
        assert careless_write(location, 4) is False
        with pytest.raises(CorruptSavepointError, match="commit lock"):
            remove_unreferenced_files(location, older_than=0)
    assert (sorted(os.listdir(outside)), os.stat(victim).st_mtime if victim.exists() else None) == before
    assert generation_at(real) == 3 and (real / "data" / "leftover.svd").exists()
    if plant != "directory":
        assert not stat.S_ISREG(os.lstat(lock).st_mode)  # left as planted, for a person to look at
