"""The changelog state backend's keyed state (pyref.flink.changelog) on real Flink checkpoints
(tests/flink/data/checkpoints; test_checkpoints.py reads, verifies, imports and exports the ones
read whole): what the bytes cannot say is refused by name, damaged DSTL bytes give typed errors
naming the file and the byte range."""

from __future__ import annotations

import pathlib
import random
import shutil

import pytest

from pyref.errors import CorruptSavepointError, SavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint
from pyref.flink.changelog import CHANGELOG
from pyref.flink.handles import ChangelogHandle, ChangeSetFiles, InMemoryChanges

from tests.flink.test_checkpoints import snapshot, truth
from tests.flink.test_corpus import assert_reads_as_truth

#: Before its first materialization: only the changes, no key serializer but a timer queue's.
UNMATERIALIZED = "2.3.0-rocksdb-changelog-keyed-kinds"
#: RocksDB's materialized files and the changes since, in uncompressed DSTL files.
MATERIALIZED = "1.20.3-rocksdb-changelog-churn-materialized"


def test_before_the_first_materialization_operators_with_timers_read_and_the_others_are_refused(
        tmp_path: pathlib.Path) -> None:
    expected = truth(UNMATERIALIZED)
    refused = [uid for uid, op in expected["operators"].items() if op["keyed_state"] and not op["timer_services"]]
    assert sorted(refused) == ["long-keys", "tuple-keys"]
    source = snapshot(UNMATERIALIZED, tmp_path)
    with FlinkSavepoint.open(source, uids=list(expected["operators"])) as sp:
        for uid in refused:
            handles = [s.managed_keyed_state for s in sp.operator(uid).state.subtasks]
            assert all(isinstance(h, ChangelogHandle) and not h.materialized and h.changes for h in handles)
            with pytest.raises(UnsupportedFormatError, match="before its first materialization.*key serializer.*"
                               "periodic-materialize"):
                sp.operator(uid).keyed_state(next(iter(expected["operators"][uid]["keyed_state"])))
    for uid in refused:
        del expected["operators"][uid]
    assert_reads_as_truth(source, expected)  # keyed-kinds and pojo-keys: their timers name the key type


def test_the_cases_hold_changes_of_both_storages(tmp_path: pathlib.Path) -> None:
    """The committed cases cover DSTL files (after a materialization, compressed too) and the
    in-memory storage (no materialization: the heap-kinds job's timers give the key type)."""
    kinds = set()
    for case in ("2.3.0-hashmap-changelog-heap-kinds-materialized", "1.20.3-hashmap-changelog-memory-heap-kinds"):
        with FlinkSavepoint.open(snapshot(case, tmp_path / case)) as sp:
            for op in sp.operators:
                for sub in op.state.subtasks:
                    handle = sub.managed_keyed_state
                    if isinstance(handle, ChangelogHandle):
                        assert op.keyed_layout(sub.index) == CHANGELOG
                        kinds |= {(bool(handle.materialized), type(part).__name__) for part in handle.changes}
    assert kinds == {(True, ChangeSetFiles.__name__), (False, InMemoryChanges.__name__)}


def _dstl_files(directory: pathlib.Path) -> list[pathlib.Path]:
    """The checkpoint's DSTL files (those its changelog handles name)."""
    with FlinkSavepoint.open(directory) as sp:
        names = {stream.location.rsplit("/", 1)[-1] for op in sp.operators for s in op.state.subtasks
                 if isinstance(s.managed_keyed_state, ChangelogHandle)
                 for part in s.managed_keyed_state.changes if isinstance(part, ChangeSetFiles)
                 for stream, _ in part.change_sets if stream is not None}
    return sorted(directory / n for n in names)


def _read_all(directory: pathlib.Path) -> None:
    with FlinkSavepoint.open(directory, uids=["churn"]) as sp:
        op = sp.operator("churn")
        for name in op.keyed_state_names:
            op.keyed_state(name).to_arrow()


def test_a_truncated_dstl_file_is_corrupt_with_its_byte_range(tmp_path: pathlib.Path) -> None:
    source = snapshot(MATERIALIZED, tmp_path)
    files = _dstl_files(source)
    assert len(files) == 2
    rng = random.Random(7)
    for cut in sorted(rng.sample(range(2, files[0].stat().st_size - 1), 12)):
        damaged = tmp_path / f"cut-{cut}"
        shutil.copytree(source, damaged)
        victim = damaged / files[0].name
        victim.write_bytes(victim.read_bytes()[:cut])
        with pytest.raises(CorruptSavepointError) as info:
            _read_all(damaged)
        assert info.value.path is not None and files[0].name in info.value.path
        assert info.value.byte_range is not None and info.value.byte_range[0] <= cut, cut


def test_damaged_dstl_bytes_give_typed_errors(tmp_path: pathlib.Path) -> None:
    """Seeded byte flips anywhere in a DSTL file: the state still reads (a value changed) or a
    typed error names the file; never another exception, a hang or a huge allocation."""
    source = snapshot(MATERIALIZED, tmp_path)
    victim_name = _dstl_files(source)[1].name
    original = (source / victim_name).read_bytes()
    rng = random.Random(11)
    corrupt = 0
    for trial in range(40):
        data = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        damaged = tmp_path / f"flip-{trial}"
        shutil.copytree(source, damaged)
        (damaged / victim_name).write_bytes(bytes(data))
        try:
            _read_all(damaged)
        except SavepointError as exc:
            corrupt += 1
            assert isinstance(exc, (CorruptSavepointError, UnsupportedFormatError)), exc
            assert exc.path is not None
    assert corrupt > 0
