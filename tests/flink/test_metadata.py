"""Flink ``_metadata`` and state handles on hand-made bytes: every version's
operator layout, the handle types, refusals, and hostile input."""

from __future__ import annotations

import random

import pytest
from pyref.testing.flink_bytes import (
    i32,
    i64,
    inline_handle,
    metadata,
    operator,
    operator_handle,
    relative_handle,
    savepoint_keyed_handle,
    subtask,
    utf,
)

from pyref.errors import CorruptSavepointError, SavepointError, UnsupportedFormatError
from pyref.flink.handles import (ChangelogHandle, ChangeSetFiles, DistributionMode, IncrementalHandle, InMemoryChanges,
                                 KeyGroupsHandle, StreamHandle)
from pyref.flink.metadata import parse_metadata

OP_ID = bytes(range(16))


def _sample(version: int = 4) -> bytes:
    keyed = savepoint_keyed_handle(0, [0, 40, 0, 90], relative_handle("abc-123", 120))
    ops = operator_handle({"offsets": (0, [30, 38]), "rules": (2, [46])}, inline_handle(b"x" * 60))
    return metadata([operator(OP_ID, 2, 4, [subtask(0, ops, keyed), subtask(1)], version=version,
                              name="Source: kafka", uid="kafka-source", coordinator=inline_handle(b"coord"))],
                    version=version)


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_versions_3_to_6(version: int) -> None:
    md = parse_metadata(_sample(version))
    assert (md.version, md.checkpoint_id) == (version, 7)
    (op,) = md.operators
    assert op.operator_id == OP_ID.hex() and (op.parallelism, op.max_parallelism) == (2, 4)
    assert (op.name, op.uid) == (("Source: kafka", "kafka-source") if version >= 5 else (None, None))
    assert op.coordinator_state.data == b"coord"
    first = op.subtasks[0]
    assert isinstance(first.managed_keyed_state, KeyGroupsHandle)
    assert first.managed_keyed_state.offsets == (0, 40, 0, 90)
    assert first.managed_keyed_state.stream.kind == "relative-file"
    states = first.managed_operator_state.states
    assert states["offsets"].mode is DistributionMode.SPLIT_DISTRIBUTE and states["rules"].offsets == (46,)
    assert op.subtasks[1].managed_keyed_state is None
    assert md.snapshot_format == ("CANONICAL" if version >= 4 else None)


def test_version_2_layout() -> None:
    # v2: chain length instead of coordinator state, legacy fields before each subtask state.
    body = OP_ID + i32(1) + i32(1) + i32(1) + i32(1) + i32(0) + i64(0) + i32(0) + i32(0) + i32(0) + b"\x00\x00"
    md = parse_metadata(i32(0x4960672D) + i32(2) + i64(1) + i32(0) + i32(1) + body)
    assert md.operators[0].subtasks[0].managed_keyed_state is None


def test_version_7_reference_checkpoint_and_finished_subtasks() -> None:
    finished = i32(-2)  # subtask 1, finished: nothing follows
    live = subtask(0) + b"\x01" + i64(3)
    md = parse_metadata(metadata([operator(OP_ID, 2, 8, [live, finished], version=7)], version=7))
    subs = md.operators[0].subtasks
    assert [(s.index, s.finished) for s in subs] == [(0, False), (1, True)]


def test_fully_finished_operator() -> None:
    md = parse_metadata(metadata([OP_ID + i32(3) + i32(8) + b"\x00" + i32(-1)]))
    assert md.operators[0].finished and md.operators[0].subtasks == ()


_INLINE = b"\x01" + utf("h") + i32(2) + b"ab"


@pytest.mark.parametrize("handle", [
    b"\x05" + i64(1) + utf("backend") + i32(0) + i32(4) + _INLINE + i32(1) + utf("000009.sst") + _INLINE + i32(0),
    b"\x0b" + i64(1) + utf("backend") + i32(0) + i32(4) + i64(9) + _INLINE + i32(1) + utf("000009.sst") + _INLINE
    + i32(0) + utf("id"),
])
def test_incremental_keyed_handles_name_their_meta_stream_and_files(handle: bytes) -> None:
    md = parse_metadata(metadata([operator(OP_ID, 1, 4, [subtask(0, None, handle)])]))
    incremental = md.operators[0].subtasks[0].managed_keyed_state
    assert isinstance(incremental, IncrementalHandle) and incremental.key_groups == range(0, 4)
    assert incremental.meta == StreamHandle("inline", "h", 2, b"ab")
    assert [name for name, _ in incremental.shared] == ["000009.sst"] and incremental.private == ()


def test_changelog_keyed_handles_name_their_materialized_state_and_changes() -> None:
    """ChangelogStateBackendHandle v2: key groups, size, the materialized handles, the non-materialized
    ones (an in-memory changelog of one change, then change sets in a file), ids."""
    in_memory = b"\x09" + i32(0) + i32(4) + i64(0) + i64(1) + i32(1) + i32(2) + i32(3) + b"abc" + utf("m")
    files = b"\x0d" + i32(0) + i32(4) + i32(1) + i64(7) + b"\x02" + i64(40) + utf("/x/dstl") + i64(1) + i64(1) \
        + utf("f") + utf("filesystem")
    materialized = b"\x0c" + i32(0) + i32(4) + bytes(32) + b"\x00" + utf("id")
    handle = (b"\x0e" + i32(0) + i32(4) + i64(0) + i32(1) + materialized + i32(2) + in_memory + files + i64(3)
              + i64(5) + utf("id"))
    md = parse_metadata(metadata([operator(OP_ID, 1, 4, [subtask(0, None, handle)])]))
    changelog = md.operators[0].subtasks[0].managed_keyed_state
    assert isinstance(changelog, ChangelogHandle) and changelog.key_groups == range(0, 4)
    assert changelog.materialized == (KeyGroupsHandle(0, (0, 0, 0, 0), None, savepoint=False),)
    memory, dstl = changelog.changes
    assert isinstance(memory, InMemoryChanges) and [c[:2] for c in memory.changes] == [(2, b"abc")]
    assert dstl == ChangeSetFiles(range(0, 4), ((StreamHandle("file", "/x/dstl", 40), 7),))
    assert changelog.materialization_id == 3


def test_changelog_changes_outside_a_changelog_handle_are_corrupt() -> None:
    bare = b"\x09" + i32(0) + i32(4) + i64(0) + i64(1) + i32(0) + utf("m")
    with pytest.raises(CorruptSavepointError, match="outside a changelog state backend handle"):
        parse_metadata(metadata([operator(OP_ID, 1, 4, [subtask(0, None, bare)])]))


@pytest.mark.parametrize("inner", [b"\x0e" + i32(0) + i32(4) + i64(0) + i32(1), b"\x08" + i32(0) + i32(4) + i64(0) + i32(1),
                                   b"\x0e" + i32(0) + i32(4) + i64(0) + i32(0) + i32(1)],
                         ids=["materialized-v2", "materialized-v1", "non-materialized"])
def test_changelog_handles_nested_in_one_another_are_corrupt_without_recursing(inner: bytes) -> None:
    """A changelog handle holds key-group, RocksDB and changelog-change handles only: 5000 changelog
    handles each nested in the previous (21 bytes apiece) raised RecursionError."""
    nested = inner * 5000 + b"\x00"
    with pytest.raises(CorruptSavepointError, match="a handle of type (14|8) among a changelog handle's"):
        parse_metadata(metadata([operator(OP_ID, 1, 4, [subtask(0, None, nested)])]))


def test_checkpoint_key_groups_handle_is_read_as_a_full_snapshot() -> None:
    """KeyGroupsStateHandle (a checkpoint's): read, its layout told from its bytes later."""
    handle = b"\x0c" + i32(2) + i32(2) + i64(10) + i64(0) + b"\x00" + utf("id")
    keyed = parse_metadata(metadata([operator(OP_ID, 1, 4, [subtask(0, None, handle)])])).operators[0].subtasks[0]
    assert keyed.managed_keyed_state == KeyGroupsHandle(2, (10, 0), None, savepoint=False)


def test_unaligned_channel_state_is_read_not_refused() -> None:
    # One input channel handle of the v3-v5 form: subtask, gate 0 channel 1, one offset, 7 bytes, no stream.
    handle = i32(0) + i32(0) + i32(1) + i32(1) + bytes(8) + bytes(7) + b"\x07" + b"\x00"
    sub = subtask(0)[:-8] + i32(1) + handle + i32(0)
    (channel,) = parse_metadata(metadata([operator(OP_ID, 1, 4, [sub])])).operators[0].subtasks[0].in_flight
    assert (channel.direction, channel.channels, channel.size, channel.merged) == ("input", ((0, 1),), 7, False)


def test_wrong_magic_and_unknown_version() -> None:
    with pytest.raises(CorruptSavepointError, match="magic"):
        parse_metadata(b"PK\x03\x04" + bytes(20))
    with pytest.raises(UnsupportedFormatError, match="version 99"):
        parse_metadata(i32(0x4960672D) + i32(99) + bytes(20))


def test_every_truncation_is_a_typed_error() -> None:
    # Up to the Java-serialized properties at the end, which are kept as bytes, unparsed.
    data = _sample(6)
    for cut in range(len(data) - len(b"\xac\xed\x00\x05t\x00\tCANONICAL") + 4):
        try:
            parse_metadata(data[:cut])
        except SavepointError:
            continue
        raise AssertionError(f"a metadata cut at {cut} of {len(data)} bytes parsed")


def test_random_damage_gives_typed_errors_only() -> None:
    rng = random.Random(11)
    data = _sample(4)
    for _ in range(400):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(8, len(damaged))] = rng.randrange(256)
        try:
            parse_metadata(bytes(damaged))
        except SavepointError:
            pass


def _file_handle(path: str, size: int) -> bytes:
    return b"\x02" + i64(size) + utf(path)


def test_state_paths_stay_in_the_savepoint_directory(tmp_path) -> None:
    from pyref.flink.handles import LocalHandleStore, StreamHandle

    sp = tmp_path / "sp"
    sp.mkdir()
    (sp / "state").write_bytes(b"abc")
    (tmp_path / "secret").write_bytes(b"xyz")
    store = LocalHandleStore(str(sp))
    assert store.local_path(StreamHandle("relative-file", "state", 3)) == str(sp / "state")
    assert store.local_path(StreamHandle("file", f"file:{sp}/state", 3)) == str(sp / "state")
    # A savepoint moved from elsewhere: its absolute paths resolve to the file of the same name here.
    assert store.local_path(StreamHandle("file", "file:/old/place/state", 3)) == str(sp / "state")
    with pytest.raises(CorruptSavepointError, match="leaves"):
        store.local_path(StreamHandle("relative-file", "../secret", 3))
    with pytest.raises(UnsupportedFormatError, match="outside the savepoint directory"):
        store.local_path(StreamHandle("file", str(tmp_path / "secret"), 3))
    assert LocalHandleStore(str(sp), allow_external_files=True).local_path(
        StreamHandle("file", str(tmp_path / "secret"), 3)) == str(tmp_path / "secret")
    with pytest.raises(UnsupportedFormatError, match="s3"):
        store.local_path(StreamHandle("file", "s3://bucket/elsewhere", 3))
    with pytest.raises(CorruptSavepointError, match="says 9 bytes"):
        store.open(StreamHandle("relative-file", "state", 9))


def test_a_checkpoints_shared_state_beside_it_is_read_from_there(tmp_path) -> None:
    """An incremental checkpoint's earlier SST files are in ../shared: read from the directory of
    that name beside the checkpoint, wherever the handle says it was; a link out of it is corrupt."""
    from pyref.flink.handles import LocalHandleStore, StreamHandle

    (tmp_path / "chk-3").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "sst").write_bytes(b"abc")
    (tmp_path / "secret").write_bytes(b"abc")
    (tmp_path / "shared" / "link").symlink_to(tmp_path / "secret")
    store = LocalHandleStore(str(tmp_path / "chk-3"))
    assert store.local_path(StreamHandle("file", "file:/elsewhere/job/shared/sst", 3)) == str(tmp_path / "shared" / "sst")
    with pytest.raises(CorruptSavepointError, match="'link' in .*shared is a link leading out of it"):
        store.local_path(StreamHandle("file", "file:/elsewhere/job/shared/link", 3))
    with pytest.raises(CorruptSavepointError, match="checkpoint's taskowned state.*does not exist"):
        store.local_path(StreamHandle("file", f"file:{tmp_path}/taskowned/gone", 3))


def test_a_checkpoints_shared_directory_linked_out_of_its_parent_is_read_only_when_allowed(tmp_path) -> None:
    """ForSt's shared/<dir>/db/<file> and RocksDB's shared/<file>: the shared directory itself a
    link to another directory would let a handle open files there (as a pyref base may not)."""
    from pyref.flink.handles import LocalHandleStore, StreamHandle

    (tmp_path / "job" / "chk-3").mkdir(parents=True)
    (tmp_path / "elsewhere" / "op" / "db").mkdir(parents=True)
    (tmp_path / "elsewhere" / "op" / "db" / "f").write_bytes(b"abc")
    (tmp_path / "elsewhere" / "sst").write_bytes(b"abc")
    (tmp_path / "job" / "shared").symlink_to(tmp_path / "elsewhere")
    for location in ("file:/old/job/shared/op/db/f", "file:/old/job/shared/sst"):
        handle = StreamHandle("file", location, 3)
        with pytest.raises(UnsupportedFormatError, match="shared directory is a link to .*allow_external_files"):
            LocalHandleStore(str(tmp_path / "job" / "chk-3")).local_path(handle)
        allowed = LocalHandleStore(str(tmp_path / "job" / "chk-3"), allow_external_files=True).local_path(handle)
        assert allowed.startswith(str(tmp_path / "elsewhere"))
    (tmp_path / "job" / "shared").unlink()
    (tmp_path / "elsewhere").rename(tmp_path / "job" / "shared-copy")
    (tmp_path / "job" / "shared").symlink_to("shared-copy")  # a link within the parent is followed
    assert LocalHandleStore(str(tmp_path / "job" / "chk-3")).local_path(StreamHandle("file", "/old/shared/sst", 3))


def test_state_paths_through_links_or_with_nul_stay_typed(tmp_path) -> None:
    """Fuzzing found these: the fallback for a moved savepoint followed a link in the
    directory to a file outside it, and a NUL in a path raised ValueError."""
    from pyref.flink.handles import LocalHandleStore, StreamHandle

    sp = tmp_path / "sp"
    sp.mkdir()
    (tmp_path / "secret").write_bytes(b"xyz")
    (sp / "state").symlink_to("../secret")
    (sp / "bucket").symlink_to("../secret")
    store = LocalHandleStore(str(sp))
    for location in ("/old/place/state", "file:///old/place/state", "s3://elsewhere/bucket"):
        with pytest.raises(CorruptSavepointError, match="link leading out"):
            store.local_path(StreamHandle("file", location, 3))
    for kind, location in (("relative-file", "st\0ate"), ("file", "/old/st\0ate"), ("file", "file:///old/st%00ate"),
                           ("file", "s3://b/st\0ate")):
        with pytest.raises(CorruptSavepointError, match="NUL"):
            store.local_path(StreamHandle(kind, location, 3))


def test_segment_and_file_handles() -> None:
    segment = b"\x0f" + i64(5) + i64(10) + i32(0) + utf("/cp/shared/merged") + utf("id-1")
    ops = operator_handle({"offsets": (0, [1])}, segment)
    md = parse_metadata(metadata([operator(OP_ID, 1, 4, [subtask(0, ops, None)])]))
    stream = md.operators[0].subtasks[0].managed_operator_state.stream
    assert (stream.kind, stream.location, stream.start, stream.size) == ("segment", "/cp/shared/merged", 5, 10)
    keyed = savepoint_keyed_handle(0, [0], _file_handle("file:/sp/abc", 7))
    md = parse_metadata(metadata([operator(OP_ID, 1, 1, [subtask(0, None, keyed)])]))
    assert md.operators[0].subtasks[0].managed_keyed_state.stream.location == "file:/sp/abc"


def test_negative_segment_start_is_corrupt() -> None:
    """Found by fuzzing: a negative start indexed the merged file from its end (struct.error)."""
    segment = b"\x0f" + i64(-1) + i64(10) + i32(0) + utf("merged") + utf("id-1")
    keyed = savepoint_keyed_handle(0, [0], segment)
    data = metadata([operator(OP_ID, 1, 1, [subtask(0, None, keyed)])])
    with pytest.raises(CorruptSavepointError, match="negative segment start -1") as info:
        parse_metadata(data, "_metadata")
    at = data.index(segment) + 1
    assert info.value.byte_range == (at, at + 8)


def test_a_subtask_with_two_states_is_corrupt_and_subtasks_are_found_by_index(tmp_path) -> None:
    """Flink keeps an operator's subtask states in a map (the last of an index read wins there): pyref read
    the first with operator state. Found attacking file-merging handles: each subtask asked for searched
    them all, quadratic in the parallelism (32768 subtasks, 1.6 MB of _metadata, over 10 s)."""
    from pyref.flink import FlinkSavepoint
    from pyref.testing.flink_bytes import inline_handle, metadata, operator, operator_handle, operator_stream, subtask

    empty, _ = operator_stream([])
    twice = metadata([operator(bytes(16), 4, 128, [subtask(1), subtask(0), subtask(1)])])
    with pytest.raises(CorruptSavepointError, match="subtask 1 has two states") as info:
        parse_metadata(twice, "_metadata")
    at = twice.rindex(subtask(1))
    assert info.value.byte_range == (at, at + 4)
    subtasks = [subtask(i, operator_handle({}, inline_handle(empty))) for i in reversed(range(3))]
    (tmp_path / "_metadata").write_bytes(metadata([operator(bytes(16), 3, 128, subtasks)]))
    with FlinkSavepoint.open(tmp_path) as sp:
        op = sp.operators[0]
        assert [op.operator_stream(i) is not None for i in range(4)] == [True, True, True, False]
        assert [op.keyed_layout(i) for i in range(4)] == [None] * 4
