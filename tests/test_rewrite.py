"""Rescale (shallow and copy) and serializer migration."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest

from pyref.cli import main
from pyref.inspection import verify
from pyref.testing import write_seeds
from pyref import (
    CorruptSavepointError,
    IncompatibleSerializerError,
    InvalidArgumentError,
    Savepoint,
    SavepointWriter,
    flatten,
    migrate_state,
    rescale,
)
from pyref.redistribution import DistributionMode
from pyref.serializers import Int32, Int64, Nullable, String, Tuple


def _offsets(path, parallelism):
    sp = Savepoint.open(path)
    return [list(s.list_state("offsets")) for s in sp.restore_plan(parallelism).subtasks("kafka-source")]


@pytest.fixture
def big_seeds(tmp_path):
    write_seeds(tmp_path / "sp", inline_bytes=0)
    return tmp_path / "sp"


def test_shallow_rescale_writes_no_state_bytes(big_seeds, tmp_path):
    manifest = rescale(big_seeds, tmp_path / "sp4", 4).manifest
    assert not (tmp_path / "sp4" / "data").exists()
    assert [b.directory for b in manifest.bases] == ["sp"]
    assert "external-bases" in manifest.required_features
    sp4 = Savepoint.open(tmp_path / "sp4")
    assert [o.parallelism for o in sp4.operators] == [4, 4]
    assert _offsets(tmp_path / "sp4", 4) == [[100], [101], [200], [201]]
    counts = dict(sp4.operator("url-counter").keyed_state("count").items())
    assert counts == {f"/page/{i}": i for i in range(50)}


def test_rescaled_savepoint_is_what_flink_would_snapshot_after_restoring(big_seeds, tmp_path):
    rescale(big_seeds, tmp_path / "sp1", 1)
    sp1 = Savepoint.open(tmp_path / "sp1").operator("kafka-source").list_state("offsets")
    assert sp1.partition_count == 1 and list(sp1.partition(0)) == [100, 101, 200, 201]


def test_chained_shallow_rescales_flatten_their_bases(big_seeds, tmp_path):
    rescale(big_seeds, tmp_path / "sp4", 4)
    manifest = rescale(tmp_path / "sp4", tmp_path / "sp3", 3).manifest
    assert sorted(b.directory for b in manifest.bases) == ["sp", "sp4"]
    assert sorted(x for s in _offsets(tmp_path / "sp3", 3) for x in s) == [100, 101, 200, 201]


def test_deleting_the_base_of_a_shallow_savepoint_is_detected(big_seeds, tmp_path):
    rescale(big_seeds, tmp_path / "sp4", 4)
    shutil.rmtree(big_seeds)
    with pytest.raises(CorruptSavepointError, match="base savepoint 'sp' is missing"):
        _offsets(tmp_path / "sp4", 4)


def test_replacing_the_base_is_detected(big_seeds, tmp_path):
    rescale(big_seeds, tmp_path / "sp4", 4)
    write_seeds(big_seeds, overwrite=True, force=True, inline_bytes=0)  # forced past the registration of sp4
    with pytest.raises(CorruptSavepointError, match="was replaced"):
        _offsets(tmp_path / "sp4", 4)


def test_copy_rescale_is_self_contained(big_seeds, tmp_path):
    manifest = rescale(big_seeds, tmp_path / "elsewhere" / "sp4", 4, copy=True).manifest
    assert not manifest.bases and not manifest.required_features
    shutil.rmtree(big_seeds)
    assert _offsets(tmp_path / "elsewhere" / "sp4", 4) == [[100], [101], [200], [201]]


def test_shallow_target_must_be_a_sibling(big_seeds, tmp_path):
    with pytest.raises(InvalidArgumentError, match="sibling"):
        rescale(big_seeds, tmp_path / "nested" / "sp4", 4)
    assert not (tmp_path / "nested" / "sp4" / "_manifest").exists()


def test_rescale_refuses_to_overwrite_and_to_target_itself(big_seeds, tmp_path):
    with pytest.raises(InvalidArgumentError):
        rescale(big_seeds, big_seeds, 4)
    rescale(big_seeds, tmp_path / "sp4", 4)
    with pytest.raises(InvalidArgumentError, match="already exists"):
        rescale(big_seeds, tmp_path / "sp4", 4)


def test_broadcast_copies_of_removed_subtasks_are_dropped(tmp_path):
    with SavepointWriter(str(tmp_path / "sp"), inline_bytes=0) as w:
        st = w.add_operator("op", parallelism=3).list_state("rules", String(), DistributionMode.BROADCAST)
        for i in range(3):
            st.add(i, ["r1", "r2"])
    manifest = rescale(tmp_path / "sp", tmp_path / "sp1", 1).manifest
    state = manifest.operators[0].list_states[0]
    assert len(state.chunks) == 1 and len(state.partitions) == 1


def test_union_state_is_stored_once_whatever_the_parallelism(tmp_path):
    with SavepointWriter(str(tmp_path / "sp"), inline_bytes=0) as w:
        st = w.add_operator("op", parallelism=2).list_state("watermarks", Int64(), DistributionMode.UNION)
        st.add(0, [1])
        st.add(1, [2, 3])
    manifest = rescale(tmp_path / "sp", tmp_path / "sp100", 100).manifest
    state = manifest.operators[0].list_states[0]
    assert len(state.partitions) == 2 and sum(len(p.ranges) for p in state.partitions) == 2
    plan = Savepoint.open(tmp_path / "sp100").restore_plan(100)
    assert all(sorted(s.list_state("watermarks")) == [1, 2, 3] for s in plan.subtasks("op"))


def test_migrate_int32_to_int64_rewrites_the_state(tmp_path):
    with SavepointWriter(str(tmp_path / "sp"), inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=2, key_serializer=String())
        op.keyed_state("count", Int32()).add(["a", "b"], [1, -2])
        op.keyed_state("other", Int32()).add(["a"], [7])
    manifest = migrate_state(tmp_path / "sp", tmp_path / "sp-v2", "op", "count", Int64()).manifest
    states = {s.name: s for s in manifest.operators[0].keyed_states}
    assert states["count"].value_serializer.serializer_id == "int64"
    assert states["other"].value_serializer.serializer_id == "int32"
    view = Savepoint.open(tmp_path / "sp-v2").operator("op").keyed_state("count")
    assert dict(view.items()) == {"a": 1, "b": -2}
    raw = next(view.read_encoded(view.proto.chunks))[1][1]
    assert len(raw[0].as_py()) == 8  # re-encoded as int64


def test_incompatible_serializer_names_state_and_both_serializers(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", parallelism=1, key_serializer=String()).keyed_state("count", Int64()).add(["a"], [1])
    with pytest.raises(IncompatibleSerializerError, match="'string@v1'.*'int64@v1'") as info:
        migrate_state(tmp_path / "sp", tmp_path / "sp2", "op", "count", String())
    assert info.value.state == "op/count"
    assert not (tmp_path / "sp2" / "_manifest").exists()
    with pytest.raises(IncompatibleSerializerError, match="'string@v1'.*'int64@v1'"):
        Savepoint.open(tmp_path / "sp").operator("op").keyed_state("count", String())


def test_incompatible_tuples_are_named_by_their_labels(tmp_path):
    """Both were named 'tuple' (serializer ids): the labels show the fields that differ."""
    visit = Tuple(String(), Int32(), names=("url", "n"))
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", parallelism=1, key_serializer=String()).keyed_state("last", visit).add(["a"], [("/", 1)])
    wrong = Tuple(String(), String(), names=("url", "n"))
    labels = r"'tuple<url:string@v1,n:string@v1>@v2' cannot read state written with 'tuple<url:string@v1,n:int32@v1>@v2'"
    with pytest.raises(IncompatibleSerializerError, match=labels):
        migrate_state(tmp_path / "sp", tmp_path / "sp2", "op", "last", wrong)
    with pytest.raises(IncompatibleSerializerError, match=labels):
        Savepoint.open(tmp_path / "sp").operator("op").keyed_state("last", wrong)


def test_opening_with_a_migratable_serializer_reads_old_bytes(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", parallelism=1).list_state("s", Int32()).add(0, [1, 2])
    state = Savepoint.open(tmp_path / "sp").operator("op").list_state("s", Int64())
    assert list(state.partition(0)) == [1, 2]


def test_reconfigured_tuple_takes_the_stored_field_names(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", parallelism=1).list_state("s", Tuple(String(), Int32(), names=("url", "n"))).add(
            0, [("a", 1)])
    state = Savepoint.open(tmp_path / "sp").operator("op").list_state("s", Tuple(String(), Int32()))
    assert [f.name for f in state.serializer.arrow_type()] == ["url", "n"]  # StructType.names needs pyarrow 16


def test_a_shallow_savepoint_cannot_replace_its_own_base(big_seeds, tmp_path):
    rescale(big_seeds, tmp_path / "b", 4)
    with pytest.raises(InvalidArgumentError, match="own base"):
        rescale(tmp_path / "b", big_seeds, 2, overwrite=True)
    assert _offsets(tmp_path / "b", 4) == [[100], [101], [200], [201]]
    assert _offsets(big_seeds, 2) == [[100, 101], [200, 201]]


def _state_of(path) -> tuple:
    return _offsets(path, 2), dict(Savepoint.open(path).operator("url-counter").keyed_state("count").items())


@pytest.mark.parametrize("via_cli", [False, True], ids=["api", "cli"])
def test_a_target_linked_to_a_base_of_the_source_is_that_base(big_seeds, tmp_path, via_cli):
    """Issue 9 item 1: `rescale SRC current --overwrite` with current -> one of SRC's bases
    passed the guard (it compared names) and destroyed the base, SRC and the link."""
    rescale(big_seeds, tmp_path / "sp4", 4)
    os.symlink("sp", tmp_path / "current")  # the common current -> sp-123 pattern
    before = _state_of(big_seeds)
    if via_cli:
        assert main(["rescale", str(tmp_path / "sp4"), str(tmp_path / "current"), "-p", "2", "--overwrite"]) == 2
    else:
        with pytest.raises(InvalidArgumentError, match="own base"):
            rescale(tmp_path / "sp4", tmp_path / "current", 2, overwrite=True)
    assert _state_of(big_seeds) == _state_of(tmp_path / "current") == before
    assert _offsets(tmp_path / "sp4", 4) == [[100], [101], [200], [201]]
    with pytest.raises(InvalidArgumentError, match="differ from the source"):
        rescale(big_seeds, tmp_path / "current", 2, overwrite=True, copy=True)


def test_a_base_that_is_a_link_inside_the_parent_is_compared_by_what_it_names(tmp_path):
    write_seeds(tmp_path / "real", inline_bytes=0)
    os.symlink("real", tmp_path / "sp")
    rescale(tmp_path / "sp", tmp_path / "sp4", 4)  # the base is recorded by its real name
    assert [b.directory for b in Savepoint.open(tmp_path / "sp4").manifest.bases] == ["real"]
    for target in ("sp", "real"):
        with pytest.raises(InvalidArgumentError, match="own base"):
            rescale(tmp_path / "sp4", tmp_path / target, 2, overwrite=True)
    assert _offsets(tmp_path / "sp4", 4) == [[100], [101], [200], [201]]


def test_a_source_named_through_a_link_into_another_directory(tmp_path):
    """Issue 9 item 8: a shallow rescale of links/cur -> sps/sp exited 0 and wrote a
    savepoint no reader could open; a savepoint opened through a cross-directory link
    could not find its base."""
    (tmp_path / "sps").mkdir()
    (tmp_path / "links").mkdir()
    write_seeds(tmp_path / "sps" / "sp", inline_bytes=0)
    os.symlink(tmp_path / "sps" / "sp", tmp_path / "links" / "cur")
    with pytest.raises(InvalidArgumentError, match="sibling"):
        rescale(tmp_path / "links" / "cur", tmp_path / "links" / "sp4", 4)
    assert not (tmp_path / "links" / "sp4").exists()
    manifest = rescale(tmp_path / "links" / "cur", tmp_path / "sps" / "sp4", 4).manifest  # beside what the link names
    assert [b.directory for b in manifest.bases] == ["sp"]
    os.symlink(tmp_path / "sps" / "sp4", tmp_path / "links" / "sp4")
    assert _offsets(tmp_path / "links" / "sp4", 4) == [[100], [101], [200], [201]]
    assert verify(Savepoint.open(tmp_path / "links" / "sp4")).ok


@pytest.mark.parametrize("damage", ["delete", "replace"])
def test_a_shallow_source_with_a_broken_chain_is_refused(big_seeds, tmp_path, damage):
    """Issue 9 item 9: deriving from a savepoint whose base was deleted or replaced exited 0
    and wrote another unreadable savepoint."""
    rescale(big_seeds, tmp_path / "sp4", 4)
    if damage == "delete":
        shutil.rmtree(big_seeds)
    else:
        write_seeds(big_seeds, overwrite=True, force=True, inline_bytes=0)
    with pytest.raises(CorruptSavepointError, match="missing" if damage == "delete" else "was replaced"):
        rescale(tmp_path / "sp4", tmp_path / "sp2", 2)
    assert not (tmp_path / "sp2").exists()
    assert main(["rescale", str(tmp_path / "sp4"), str(tmp_path / "sp2"), "-p", "2"]) == 3
    assert not (tmp_path / "sp2").exists()


def test_a_source_whose_name_cannot_be_a_base_asks_for_a_copy(tmp_path, capsys):
    """Issue 9 item 22: a ':' in the source's name gave "corrupt" (the written manifest
    failed validation) instead of "use --copy"."""
    source = tmp_path / "sp-2024-05-01T10:00"
    write_seeds(source, inline_bytes=0)
    with pytest.raises(InvalidArgumentError, match="copy=True"):
        rescale(source, tmp_path / "sp4", 4)
    assert main(["rescale", str(source), str(tmp_path / "sp4"), "-p", "4", "--json"]) == 2
    assert "--copy" in json.loads(capsys.readouterr().out)["error"]
    assert not (tmp_path / "sp4").exists()
    rescale(source, tmp_path / "sp4", 4, copy=True)
    assert _offsets(tmp_path / "sp4", 4) == [[100], [101], [200], [201]]


UNREFERENCED = (pathlib.Path(__file__).resolve().parent.parent / "compat_tests" / "golden" / "1.0"
                / "manifest-rules-unreferenced-chunk-and-rows")


@pytest.mark.parametrize("derive", ["flatten", "migrate"])
def test_copies_skip_chunks_no_range_refers_to_and_rows_no_range_selects(tmp_path, derive):
    """A damaged chunk no range refers to and an unselected row that is no int64 are no state
    (spec/format.md §5.3): a copy and a migration leave them out instead of failing on them."""
    shutil.copytree(UNREFERENCED / "savepoint", tmp_path / "sp")
    if derive == "flatten":
        flatten(tmp_path / "sp", tmp_path / "out")
    else:
        migrate_state(tmp_path / "sp", tmp_path / "out", "source", "offsets", Nullable(Int64()), copy=True)
    before, after = Savepoint.open(tmp_path / "sp"), Savepoint.open(tmp_path / "out")
    assert verify(after).ok and not verify(after).warnings
    for p in (1, 2, 3):
        assert ([list(s.list_state("offsets")) for s in before.restore_plan(p).subtasks("source")]
                == [list(s.list_state("offsets")) for s in after.restore_plan(p).subtasks("source")])
    chunks = [len(sp.operator("source").proto.list_states[0].chunks) for sp in (before, after)]
    assert chunks[1] < chunks[0]
