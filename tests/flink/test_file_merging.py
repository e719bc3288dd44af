"""Checkpoints taken with file merging (FLIP-306, Flink 1.20+): every stream a segment of a merged
file (``SegmentFileStateHandle``, type 15) one directory below the checkpoint's ``taskowned/`` or
``shared/``, operator state in ``FileMergingOperatorStreamStateHandle`` (type 17) or, for a subtask
without any, an empty one. Decoded from hand-made bytes and from the committed real checkpoints
(tests/flink/data/checkpoints/*-file-merging-*, which tests/flink/test_checkpoints.py reads as their
truth); a segment is checked against its file, and its path stays in the checkpoint's directories."""

from __future__ import annotations

import pathlib

import pytest

from pyref.errors import CorruptSavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint
from pyref.flink.handles import (DistributionMode, IncrementalHandle, KeyGroupsHandle, LocalHandleStore, StreamHandle,
                                 checkpoint_sibling)
from pyref.flink.metadata import parse_metadata
from pyref.testing.flink_bytes import (EMPTY_SEGMENT, i32, i64, merging_operator_handle, metadata, operator,
                                       segment_handle, subtask, utf)

from compat_tests.flink.checkpoints import committed_snapshot

DATA = pathlib.Path(__file__).resolve().parent / "data" / "checkpoints"
OP_ID = bytes(range(16))
TASKOWNED = "file:/old/job/taskowned/job_1_tm_2/merged"


def _parse(managed_operator: bytes) -> object:
    return parse_metadata(metadata([operator(OP_ID, 1, 4, [subtask(0, managed_operator)])]), "_metadata")


def test_a_file_merging_operator_handle_is_its_states_and_segment() -> None:
    handle = merging_operator_handle({"offsets": (0, [3, 11]), "union": (1, [19])}, segment_handle(40, 27, TASKOWNED))
    state = _parse(handle).operators[0].subtasks[0].managed_operator_state
    assert {n: (i.mode, i.offsets) for n, i in state.states.items()} == {
        "offsets": (DistributionMode.SPLIT_DISTRIBUTE, (3, 11)), "union": (DistributionMode.UNION, (19,))}
    assert (state.stream.kind, state.stream.location, state.stream.start, state.stream.size) == (
        "segment", TASKOWNED, 40, 27)


def test_an_empty_file_merging_operator_handle_is_no_operator_state() -> None:
    """Flink writes one for every subtask without operator state (it keeps the subtask's directories)."""
    assert _parse(merging_operator_handle({}, EMPTY_SEGMENT, empty=True)).operators[0].subtasks[0] \
        .managed_operator_state is None


FILE_HANDLE = b"\x02" + bytes(8) + b"\x00\x01f"


@pytest.mark.parametrize(("states", "stream", "empty", "match", "where"), [
    ({"s": (0, [0])}, EMPTY_SEGMENT, True, r"empty file-merging operator handle names states \['s'\]", "handle"),
    ({}, segment_handle(0, 4, TASKOWNED), True, r"type 15, not a segment \(type 16", (0, 1)),
    ({"s": (0, [0])}, FILE_HANDLE, False, r"type 2, not a segment \(type 15", (0, 1)),
    ({"s": (0, [0])}, segment_handle(0, -4, TASKOWNED), False, "negative segment size -4", (9, 8)),
    ({"s": (0, [0])}, segment_handle(0, 4, TASKOWNED, scope=2), False, "unknown segment scope 2", (17, 4)),
])
def test_damaged_file_merging_handles_are_corrupt_where_they_are(states, stream: bytes, empty: bool, match: str,
                                                                 where: str | tuple[int, int]) -> None:
    handle = merging_operator_handle(states, stream, empty=empty)
    data = metadata([operator(OP_ID, 1, 4, [subtask(0, handle)])])
    with pytest.raises(CorruptSavepointError, match=match) as info:
        parse_metadata(data, "_metadata")
    if where == "handle":
        assert info.value.byte_range[0] == data.index(handle)
    else:  # a field of the stream handle: its type byte, or the segment's size or scope
        at = data.index(handle) + len(handle) - len(stream) + where[0]
        assert info.value.byte_range == (at, at + where[1])


def test_segment_files_are_sought_one_directory_below_shared_and_taskowned() -> None:
    assert checkpoint_sibling("/j/shared/job_1_op_2_0_2/f", merged=True) == ("shared", "job_1_op_2_0_2/f")
    assert checkpoint_sibling("/j/taskowned/job_1_tm_2/f", merged=True) == ("taskowned", "job_1_tm_2/f")
    assert checkpoint_sibling("/j/shared/job_1_op_2_0_2/f") is None  # a file handle's: never sought there
    assert checkpoint_sibling("/j/shared/../f", merged=True) is None
    assert checkpoint_sibling("/j/chk-3/x/f", merged=True) is None


def _committed(case: str, tmp_path: pathlib.Path) -> pathlib.Path:
    return committed_snapshot(DATA / case, tmp_path)


def _segments(sp: FlinkSavepoint) -> list[StreamHandle]:
    streams: list[StreamHandle | None] = []
    for op in sp.operators:
        for s in op.state.subtasks:
            if s.managed_operator_state is not None:
                streams.append(s.managed_operator_state.stream)
            for keyed in (s.managed_keyed_state, s.raw_keyed_state):
                if isinstance(keyed, KeyGroupsHandle):
                    streams.append(keyed.stream)
                elif isinstance(keyed, IncrementalHandle):
                    streams += [keyed.meta, *(h for _, h in keyed.shared + keyed.private)]
    return [s for s in streams if s is not None]


@pytest.mark.parametrize("version", ["1.20.3", "2.3.0"])
def test_real_file_merging_checkpoints_hold_only_segments_several_to_a_file(version: str, tmp_path) -> None:
    checkpoint = _committed(f"{version}-hashmap-file-merging-seeds", tmp_path / "heap")
    with FlinkSavepoint.open(checkpoint, uids=["kafka-source", "url-counter"]) as sp:  # 1.20's v4 names no uids
        segments = _segments(sp)
        # The subtasks of url-counter (keyed state only) and of the filter (none) write empty handles, of no states.
        assert (checkpoint / "_metadata").read_bytes().count(b"\x11" + i32(0)) == 4
        empty = [(op.name, s.index) for op in sp.operators for s in op.state.subtasks if s.managed_operator_state is None]
        assert len(empty) == 4 and {("url-counter", 0), ("url-counter", 1)} <= set(empty)
        assert {s.kind for s in segments} == {"segment"}
        assert all("/taskowned/job_" in s.location for s in segments)  # exclusive: the task manager's files
        assert len({s.location for s in segments}) < len(segments)
    with FlinkSavepoint.open(_committed(f"{version}-rocksdb-incremental-file-merging-churn", tmp_path / "rocksdb")) as sp:
        segments = _segments(sp)
        assert {s.kind for s in segments} == {"segment"}
        assert any("/shared/job_" in s.location and "_op_" in s.location for s in segments)  # the SST files


def test_a_segment_beyond_its_merged_file_is_corrupt_naming_file_and_range(tmp_path) -> None:
    checkpoint = _committed("2.3.0-hashmap-file-merging-seeds", tmp_path)
    with FlinkSavepoint.open(checkpoint) as sp:
        segment = sp.operator("kafka-source").state.subtasks[0].managed_operator_state.stream
        assert segment.start > 0 or segment.size > 0
        path = pathlib.Path(sp.store.local_path(segment))
        assert path.parent.parent == checkpoint.parent / "taskowned"
        path.write_bytes(path.read_bytes()[:segment.start + segment.size - 1])
    with FlinkSavepoint.open(checkpoint) as sp:
        with pytest.raises(CorruptSavepointError, match=f"{segment.size} bytes at {segment.start}") as info:
            sp.operator("kafka-source").list_state("offsets").to_pylist()
    assert info.value.path == str(path)
    assert info.value.byte_range == (segment.start, segment.start + segment.size)


def test_segment_paths_stay_in_the_checkpoints_directories(tmp_path) -> None:
    (tmp_path / "job" / "chk-3").mkdir(parents=True)
    (tmp_path / "job" / "taskowned" / "job_1_tm_2").mkdir(parents=True)
    (tmp_path / "job" / "taskowned" / "job_1_tm_2" / "merged").write_bytes(b"abcdef")
    (tmp_path / "secret").write_bytes(b"abcdef")
    (tmp_path / "job" / "taskowned" / "job_1_tm_2" / "link").symlink_to(tmp_path / "secret")
    store = LocalHandleStore(str(tmp_path / "job" / "chk-3"))
    buffer, start, end, name = store.open(StreamHandle("segment", TASKOWNED, 3, start=2))
    assert (bytes(buffer[start:end]), name) == (b"cde", str(tmp_path / "job" / "taskowned" / "job_1_tm_2" / "merged"))
    with pytest.raises(CorruptSavepointError, match="'job_1_tm_2/link' in .*taskowned is a link leading out of it"):
        store.open(StreamHandle("segment", "file:/old/job/taskowned/job_1_tm_2/link", 3))
    with pytest.raises(CorruptSavepointError, match="taskowned state.*does not exist"):
        store.open(StreamHandle("segment", "file:/old/job/taskowned/job_1_tm_9/merged", 3))
    outside = StreamHandle("segment", f"file:{tmp_path}/secret", 3)
    with pytest.raises(UnsupportedFormatError, match="outside the savepoint directory.*allow_external_files"):
        store.open(outside)
    allowed = LocalHandleStore(str(tmp_path / "job" / "chk-3"), allow_external_files=True)
    assert allowed.local_path(outside) == str(tmp_path / "secret")


def test_an_sst_file_at_a_segments_start_is_read_there_and_its_errors_name_the_merged_files_bytes(tmp_path) -> None:
    """Flink may merge RocksDB's files anywhere in a file (they sat at 0 in the committed checkpoints): an SST
    file moved 100 bytes in reads as before, and a damaged block of it is named at its bytes in the merged
    file (they were named at the SST file's own offsets)."""
    checkpoint = _committed("2.3.0-rocksdb-incremental-file-merging-churn", tmp_path)
    with FlinkSavepoint.open(checkpoint) as sp:
        op = next(op for op in sp.operators if op.keyed_state_names)
        expected = {name: op.keyed_state(name).to_arrow() for name in op.keyed_state_names}
        handle = next(s.managed_keyed_state for s in op.state.subtasks if isinstance(s.managed_keyed_state,
                                                                                     IncrementalHandle))
        sst = dict(handle.shared)[sorted(dict(handle.shared))[0]]
        path = pathlib.Path(sp.store.local_path(sst))
    assert sst.start == 0
    data = (checkpoint / "_metadata").read_bytes()
    def head(start: int, scope: int) -> bytes:  # the segment handle up to its logical file id
        return b"\x0f" + i64(start) + i64(sst.size) + i32(scope) + utf(sst.location)

    scope = next(scope for scope in (0, 1) if head(0, scope) in data)
    assert data.count(head(0, scope)) == 1
    (checkpoint / "_metadata").write_bytes(data.replace(head(0, scope), head(100, scope)))
    merged = path.read_bytes()
    path.write_bytes(bytes(100) + merged)
    with FlinkSavepoint.open(checkpoint) as sp:
        op = sp.operator(op.name)
        assert {name: op.keyed_state(name).to_arrow() for name in op.keyed_state_names} == expected
    damaged = bytearray(bytes(100) + merged)
    damaged[100 + 50] ^= 0x40  # in the SST file's first data block
    path.write_bytes(damaged)
    with FlinkSavepoint.open(checkpoint) as sp:
        with pytest.raises(CorruptSavepointError, match="SST file: data block checksum") as info:
            sp.operator(op.name).keyed_state_names
    assert info.value.path == str(path)
    assert info.value.byte_range[0] == 100 and info.value.byte_range[0] <= 150 < info.value.byte_range[1]


def test_a_damaged_broadcast_state_in_a_segment_is_named_at_the_merged_files_bytes(tmp_path) -> None:
    """A broadcast state's entries were named at their offset in the segment's stream, not in the file."""
    checkpoint = _committed("2.3.0-hashmap-file-merging-operator-state", tmp_path)
    with FlinkSavepoint.open(checkpoint) as sp:
        handle = sp.operator("keyed-broadcast").state.subtasks[0].managed_operator_state
        (offset,) = handle.states["thresholds"].offsets
        path = pathlib.Path(sp.store.local_path(handle.stream))
    at = handle.stream.start + offset  # the map's entry count
    assert handle.stream.start > 0
    data = bytearray(path.read_bytes())
    data[at:at + 4] = i32(1 << 30)
    path.write_bytes(data)
    with FlinkSavepoint.open(checkpoint) as sp:
        with pytest.raises(CorruptSavepointError, match="broadcast entry count") as info:
            sp.operator("keyed-broadcast").broadcast_state("thresholds").to_dict(0)
    assert (info.value.path, info.value.byte_range) == (str(path), (at, at + 4))


def test_handles_naming_the_same_bytes_parse_their_head_once(tmp_path, monkeypatch) -> None:
    """Segments of one merged file are named by many handles: a stream head named by several (hostile:
    100 subtasks' handles on one 150 KB head took 41 s) is parsed once, by the bytes it is."""
    import pyref.flink.savepoint as savepoint_module
    from pyref.testing.flink_bytes import (LONG, i64, keyed_proxy, keyed_state_meta, meta_info, operator_stream,
                                           relative_handle, savepoint_keyed_handle, snapshot)

    meta = meta_info("l", 1, {"OPERATOR_STATE_DISTRIBUTION_MODE": "UNION"}, {"VALUE_SERIALIZER": snapshot(LONG)})
    stream, offsets = operator_stream([(meta, [i64(7), i64(8)])])
    merged = tmp_path / "job" / "taskowned" / "job_1_tm_2" / "merged"
    merged.parent.mkdir(parents=True)
    merged.write_bytes(b"x" * 5 + stream)
    handle = merging_operator_handle({"l": (1, offsets[0])}, segment_handle(5, len(stream), TASKOWNED))
    keyed = keyed_proxy(snapshot(LONG), [keyed_state_meta("count", "VALUE", snapshot(LONG))])
    (tmp_path / "job" / "chk-3").mkdir()
    (tmp_path / "job" / "chk-3" / "keyed").write_bytes(keyed)
    keyed_handle = savepoint_keyed_handle(0, [0] * 128, relative_handle("keyed", len(keyed)))
    (tmp_path / "job" / "chk-3" / "_metadata").write_bytes(metadata([
        operator(OP_ID, 3, 128, [subtask(i, handle) for i in range(3)]),
        operator(bytes(range(1, 17)), 1, 128, [subtask(0, handle, keyed_handle)]),
        operator(bytes(range(2, 18)), 1, 128, [subtask(0, None, keyed_handle)])]))
    calls = []
    for name in ("read_operator_head", "read_keyed_backend_meta"):
        original = getattr(savepoint_module, name)
        monkeypatch.setattr(savepoint_module, name, lambda *args, _f=original, _n=name: calls.append(_n) or _f(*args))
    with FlinkSavepoint.open(tmp_path / "job" / "chk-3") as sp:
        for op in sp.operators:
            if op.list_state_names:
                assert [list(op.list_state("l").partition(i)) for i in range(op.parallelism)] == [[7, 8]] * op.parallelism
            assert op.keyed_state_names == (["count"] if op.state.subtasks[0].managed_keyed_state else [])
    assert sorted(calls) == ["read_keyed_backend_meta", "read_operator_head"]


def test_inline_streams_of_one_name_are_parsed_each(tmp_path) -> None:
    """Heads are kept by the bytes they are; bytes inline in _metadata by their handle, not their name, which
    hostile bytes may give two streams of one length."""
    from pyref.testing.flink_bytes import LONG, i64, inline_handle, meta_info, operator_handle, operator_stream, snapshot

    def stream(state: str) -> bytes:
        meta = meta_info(state, 1, {"OPERATOR_STATE_DISTRIBUTION_MODE": "SPLIT_DISTRIBUTE"},
                         {"VALUE_SERIALIZER": snapshot(LONG)})
        data, offsets = operator_stream([(meta, [i64(1)])])
        return operator_handle({state: (0, offsets[0])}, inline_handle(data, "same-name"))

    (tmp_path / "_metadata").write_bytes(metadata([operator(OP_ID, 2, 128, [subtask(0, stream("a")),
                                                                           subtask(1, stream("b"))])]))
    with FlinkSavepoint.open(tmp_path) as sp:
        op = sp.operators[0]
        assert op.list_state_names == ["a", "b"]
        assert [list(op.list_state(s).partition(i)) for s in "ab" for i in (0, 1)] == [[1], [], [], [1]]
