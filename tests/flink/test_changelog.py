"""The changelog state backend's keyed state (pyref.flink.changelog) on real Flink checkpoints
(tests/flink/data/checkpoints; test_checkpoints.py reads, verifies, imports and exports the ones
read whole): what the bytes cannot say is refused by name, damaged DSTL bytes give typed errors
naming the file and the byte range."""

from __future__ import annotations

import pathlib
import random
import shutil

import numpy as np
import pyarrow as pa
import pytest

from pyref.errors import CorruptSavepointError, SavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint
from pyref.flink.changelog import (ADD, ADD_ELEMENT, CHANGELOG, CLEAR, MERGE_NS, REMOVE_ELEMENT, SET, SET_INTERNAL,
                                   _StateTable, iter_changes)
from pyref.flink.datainput import DataInput
from pyref.flink.handles import ChangelogHandle, ChangeSetFiles, InMemoryChanges
from pyref.flink.keyed import KeyedRows
from pyref.flink.meta_info import StateMetaInfo
from pyref.flink.serializers import FlinkType
from pyref.testing.flink_bytes import i32, i64, metadata, operator, subtask, utf

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


def dstl_files(directory: pathlib.Path) -> list[pathlib.Path]:
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
    files = dstl_files(source)
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
    victim_name = dstl_files(source)[1].name
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


# -- operations the committed jobs log rarely or not (addAll, putAll, timers deleted) ---

_STRING = FlinkType("string", "", 0, b"")
_LONG = FlinkType("int64", "", 0, b"", length=8)


def _table(kind: str, value: FlinkType, namespace: FlinkType = _STRING) -> _StateTable:
    info = StateMetaInfo("s", "KEY_VALUE", {"KEYED_STATE_TYPE": kind},
                         {"VALUE_SERIALIZER": value, "NAMESPACE_SERIALIZER": namespace})
    return _StateTable(info, _STRING, 1)


def _text(s: str) -> bytes:
    """A Flink ``StringValue`` of ASCII chars: varint length + 1, then the chars."""
    return bytes([len(s) + 1]) + s.encode()


def _apply(table: _StateTable, operation: int, data: bytes) -> None:
    table.apply(operation, 5, DataInput(b"\x00\x00\x00" + data, 3, path="dstl"))  # after the op byte and state id


def _rows(table: _StateTable) -> dict[bytes, bytes]:
    rows = table.rows(0)
    assert set(rows.key_groups.tolist()) <= {5}
    return dict(zip(rows.keys.to_pylist(), rows.values.to_pylist()))


def _key(namespace: str) -> bytes:
    return b"\x05" + _text("k") + b"\x02" + _text(namespace) + bytes([len(_text(namespace))])


def test_list_add_set_and_merge_of_namespaces_concatenate_as_flink_does() -> None:
    table = _table("LIST", FlinkType("list", "", 0, b"", children=(_LONG,)))
    longs = lambda *vs: b"".join(v.to_bytes(8, "big") for v in vs)  # noqa: E731
    _apply(table, ADD, _text("k") + _text("w1") + (2).to_bytes(4, "big") + longs(1, 2))
    _apply(table, ADD_ELEMENT, _text("k") + _text("w1") + longs(3))
    _apply(table, SET, _text("k") + _text("w2") + (1).to_bytes(4, "big") + longs(9))
    _apply(table, ADD_ELEMENT, _text("k") + _text("w0") + longs(7))
    # MERGE_NS into w0 (the scope's namespace, then the target again) of w1 and w2: w0's, then w1's, w2's.
    _apply(table, MERGE_NS, _text("k") + _text("w0") + _text("w0") + (2).to_bytes(4, "big") + _text("w1") + _text("w2"))
    assert _rows(table) == {_key("w0"): b",".join(longs(v) for v in (7, 1, 2, 3, 9))}
    _apply(table, SET, _text("k") + _text("w0") + (0).to_bytes(4, "big"))  # an empty list: no row
    assert _rows(table) == {}


def test_merging_two_reduced_values_takes_the_value_logged_after_and_without_one_is_refused() -> None:
    table = _table("REDUCING", _LONG)
    merge_a_into_b = _text("k") + _text("b") + _text("b") + (1).to_bytes(4, "big") + _text("a")
    _apply(table, SET_INTERNAL, _text("k") + _text("a") + (4).to_bytes(8, "big"))
    _apply(table, MERGE_NS, merge_a_into_b)  # one value: moved
    assert _rows(table) == {_key("b"): (4).to_bytes(8, "big")}
    _apply(table, SET_INTERNAL, _text("k") + _text("a") + (5).to_bytes(8, "big"))
    _apply(table, MERGE_NS, merge_a_into_b)  # two: the job's function merges them, the value is unknown
    _apply(table, MERGE_NS, _text("k") + _text("c") + _text("c") + (1).to_bytes(4, "big") + _text("b"))  # and moved
    with pytest.raises(UnsupportedFormatError, match="merges 2 namespaces of REDUCING state 's' and logs no value"):
        _rows(table)
    _apply(table, SET_INTERNAL, _text("k") + _text("c") + (12).to_bytes(8, "big"))  # the window's next add
    assert _rows(table) == {_key("c"): (12).to_bytes(8, "big")}


SESSIONS = "2.3.0-hashmap-changelog-sessions"


def test_session_windows_merge_namespaces_and_log_the_merged_value_after(tmp_path: pathlib.Path) -> None:
    """Real bytes of merging windows (tests/flink/test_checkpoints.py reads them as their truth): every
    MERGE_NS of the reduced and aggregated contents of two or more windows is followed by a SET_INTERNAL
    of the target, the element that merged them added."""
    source = snapshot(SESSIONS, tmp_path)
    merges: dict[str, int] = {}
    with FlinkSavepoint.open(source) as sp:
        for uid in ("session-process", "session-reduce", "session-aggregate"):
            (sub,) = sp.operator(uid).state.subtasks
            handle = sub.managed_keyed_state
            assert isinstance(handle, ChangelogHandle) and not handle.materialized
            operations = [c.data[0] for c in iter_changes(sp.store.open_file, handle) if c.key_group != -1]
            merges[uid] = operations.count(MERGE_NS)
            if uid != "session-process":  # the window contents' changes: each merge, then the add's whole value
                contents = [op for op in operations if op in (MERGE_NS, SET_INTERNAL)]
                assert all(after == SET_INTERNAL for op, after in zip(contents, contents[1:] + [None]) if op == MERGE_NS)
    assert merges == {"session-process": 12, "session-reduce": 12, "session-aggregate": 12}
    assert_reads_as_truth(source, truth(SESSIONS))


def test_map_put_all_and_null_values_keep_their_flag() -> None:
    table = _table("MAP", FlinkType("map", "", 0, b"", children=(_STRING, _LONG)))
    entries = _text("x") + b"\x00" + (1).to_bytes(8, "big") + _text("y") + b"\x01"
    _apply(table, ADD, _text("k") + _text("n") + (2).to_bytes(4, "big") + entries)
    _apply(table, REMOVE_ELEMENT, _text("k") + _text("n") + _text("x"))
    assert _rows(table) == {_key("n") + _text("y"): b"\x01"}
    _apply(table, CLEAR, _text("k") + _text("n"))
    assert _rows(table) == {}


def _replay(table: _StateTable, materialized: list[tuple[bytes, bytes]], changes: list[tuple[int, bytes]]
            ) -> list[tuple[int, bytes, bytes]]:
    """What apply_changelog does with one table: the scopes the changes touch, the materialized rows,
    then the changes applied; the rows as (key group, key, value), in order."""
    inputs = lambda: ((op, DataInput(b"\x00\x00\x00" + data, 3, path="dstl")) for op, data in changes)  # noqa: E731
    for op, inp in inputs():
        table.touch(op, 5, inp)
    keys = [k for k, _ in materialized]
    table.load(KeyedRows(np.zeros(len(keys), np.int64), np.array([k[0] for k in keys], np.int64),
                         pa.array(keys, pa.binary()), pa.array([v for _, v in materialized], pa.binary())))
    for op, inp in inputs():
        table.apply(op, 5, inp)
    rows = table.rows(0)
    return list(zip(rows.key_groups.tolist(), rows.keys.to_pylist(), rows.values.to_pylist()))


def test_changes_apply_to_the_materialized_scopes_they_touch_and_leave_the_others_as_read() -> None:
    """Only the materialized rows of scopes a change touches are taken out of Arrow into dicts; the
    others come back as read, and every row in key-group order with a map's entries together."""
    value = lambda v: b"\x00" + v.to_bytes(8, "big")  # noqa: E731
    at = lambda group, key: bytes([group]) + key[1:]  # noqa: E731  (a composite key moved to another key group)
    table = _table("MAP", FlinkType("map", "", 0, b"", children=(_STRING, _LONG)))
    materialized = [(at(3, _key("n")) + _text("a"), value(1)),
                    (_key("m") + _text("z"), value(2)),  # key group 5, a scope no change touches
                    (_key("n") + _text("x"), value(3)), (_key("n") + _text("y"), value(4)),
                    (at(7, _key("n")) + _text("b"), value(5))]
    rows = _replay(table, materialized, [(REMOVE_ELEMENT, _text("k") + _text("n") + _text("x")),
                                         (ADD_ELEMENT, _text("k") + _text("n") + _text("w") + (6).to_bytes(8, "big"))])
    assert [g for g, _, _ in rows] == [3, 5, 5, 5, 7]
    assert {k: v for _, k, v in rows} == {at(3, _key("n")) + _text("a"): value(1), _key("m") + _text("z"): value(2),
                                          _key("n") + _text("y"): value(4), _key("n") + _text("w"): value(6),
                                          at(7, _key("n")) + _text("b"): value(5)}
    assert [k[:len(_key("n"))] for _, k, _ in rows][2:4] == [_key("n")] * 2  # the changed map's entries together
    assert table.kept and sum(len(part.keys) for part in table.kept) == 3  # taken out: only the touched map's 2

    lists = _table("LIST", FlinkType("list", "", 0, b"", children=(_LONG,)))
    longs = lambda *vs: b",".join(v.to_bytes(8, "big") for v in vs)  # noqa: E731
    rows = _replay(lists, [(_key("n"), longs(1, 2)), (_key("m"), longs(3))],
                   [(ADD_ELEMENT, _text("k") + _text("n") + (9).to_bytes(8, "big"))])
    assert {k: v for _, k, v in rows} == {_key("n"): longs(1, 2, 9), _key("m"): longs(3)}


def test_timers_added_and_removed() -> None:
    timer = FlinkType("timer", "", 0, b"", children=(_STRING, FlinkType("void-namespace", "", 0, b"", length=1)))
    info = StateMetaInfo("_timer_state/event_t", "PRIORITY_QUEUE", {}, {"VALUE_SERIALIZER": timer})
    table = _StateTable(info, _STRING, 1)
    element = lambda t: (t ^ (1 << 63)).to_bytes(8, "big") + _text("k") + b"\x00"  # noqa: E731
    _apply_queue = lambda op, data: table.apply(op, 5, DataInput(b"\x00\x00\x00" + data, 3))  # noqa: E731
    _apply_queue(ADD_ELEMENT, (2).to_bytes(4, "big") + element(10) + element(20))
    _apply_queue(REMOVE_ELEMENT, element(10))
    assert _rows(table) == {b"\x05" + element(20): b""}
    with pytest.raises(CorruptSavepointError, match="a SET change of PRIORITY_QUEUE state"):
        _apply_queue(SET, element(30))
    with pytest.raises(CorruptSavepointError, match="bytes left after a change"):
        _apply_queue(REMOVE_ELEMENT, element(20) + b"\x00")


def test_a_rescaled_changelog_handle_of_several_materialized_snapshots_is_refused(tmp_path: pathlib.Path) -> None:
    materialized = b"\x0c" + i32(0) + i32(4) + bytes(32) + b"\x00" + utf("id")
    handle = b"\x0e" + i32(0) + i32(4) + i64(0) + i32(2) + materialized * 2 + i32(0) + i64(3) + i64(5) + utf("id")
    (tmp_path / "_metadata").write_bytes(metadata([operator(b"\x01" * 16, 1, 4, [subtask(0, None, handle)])]))
    with FlinkSavepoint.open(tmp_path) as sp:
        with pytest.raises(UnsupportedFormatError, match="restored from 2 materialized snapshots.*canonical savepoint"):
            sp.operators[0].keyed_layout(0)


@pytest.mark.parametrize("shift", [0, 4], ids=["named-twice", "inside-another"])
def test_a_change_set_a_handle_names_twice_or_overlapping_is_corrupt(tmp_path: pathlib.Path, shift: int) -> None:
    """Flink names each change set once: a _metadata naming one again (its LIST appends would
    apply twice, and thousands of copies would each cost the set's bytes) is refused."""
    source = snapshot(MATERIALIZED, tmp_path / "source")
    with FlinkSavepoint.open(source, uids=["churn"]) as sp:
        part = next(p for s in sp.operator("churn").state.subtasks for p in s.managed_keyed_state.changes
                    if isinstance(p, ChangeSetFiles) and len(p.change_sets) == 1)
    stream, offset = part.change_sets[0]
    assert stream is not None and stream.kind == "file"
    data = (source / "_metadata").read_bytes()
    entry = i64(offset) + b"\x02" + i64(stream.size) + utf(stream.location)  # a FileStateHandle's
    assert data.count(i32(1) + entry) == 1
    again = i64(offset + shift) + entry[8:]
    (source / "_metadata").write_bytes(data.replace(i32(1) + entry, i32(2) + entry + again))
    with pytest.raises(CorruptSavepointError, match="overlaps the one at .* names each change set once") as info:
        _read_all(source)
    assert info.value.path is not None and stream.location.rsplit("/", 1)[-1] in info.value.path


def test_merging_a_long_list_back_and_forth_keeps_flinks_order_in_linear_work() -> None:
    """A changelog moving one long list between two windows, an element added before each move, copied
    the whole list at every MERGE_NS: quadratic, minutes for a few MB of hostile changes. The moves
    nest the source's elements in the target's; the rows keep Flink's order (target's, then sources')."""
    table = _table("LIST", FlinkType("list", "", 0, b"", children=(_LONG,)))
    moves = 40_000
    for i in range(moves):  # the target, emptied by the move before, gets i, then everything before it
        target, source = ("a", "b") if i % 2 else ("b", "a")
        _apply(table, ADD_ELEMENT, _text("k") + _text(target) + i.to_bytes(8, "big"))
        _apply(table, MERGE_NS, _text("k") + _text(target) + _text(target) + (1).to_bytes(4, "big") + _text(source))
    assert _rows(table) == {_key("a"): b",".join(v.to_bytes(8, "big") for v in reversed(range(moves)))}


def test_a_change_set_in_a_segment_of_a_merged_file_is_refused(tmp_path: pathlib.Path) -> None:
    """A DSTL file is read whole (its handle's size is its stream's): a file-merging segment there, which
    Flink's changelog storage never writes, was read from its file's first byte whatever its start."""
    source = snapshot(MATERIALIZED, tmp_path / "source")
    with FlinkSavepoint.open(source, uids=["churn"]) as sp:
        part = next(p for s in sp.operator("churn").state.subtasks for p in s.managed_keyed_state.changes
                    if isinstance(p, ChangeSetFiles) and len(p.change_sets) == 1)
    stream, offset = part.change_sets[0]
    data = (source / "_metadata").read_bytes()
    entry = i64(offset) + b"\x02" + i64(stream.size) + utf(stream.location)  # a FileStateHandle's
    assert data.count(i32(1) + entry) == 1
    segment = i64(offset) + b"\x0f" + i64(0) + i64(stream.size) + i32(0) + utf(stream.location) + utf("id")
    (source / "_metadata").write_bytes(data.replace(i32(1) + entry, i32(1) + segment))
    with pytest.raises(UnsupportedFormatError, match=r"a change set in a segment of the merged file .* \(bytes 0\.\."):
        _read_all(source)
