"""The public API as a Python user meets it: one-line reprs, Arrow and pandas tables of every
state view, named tuple values, dataclass descriptions whose ``to_dict()`` is the CLI's JSON."""

from __future__ import annotations

import dataclasses
import json
import sys

import pyarrow as pa
import pytest

from pyref import DistributionMode, InvalidArgumentError, Savepoint, SavepointWriter, migrate_state, rescale
from pyref.cli import main
from pyref.descriptions import KeyedStateInfo, ListStateInfo, OperatorInfo, SavepointInfo
from pyref.inspection import describe
from pyref.restore import PlanSummary
from pyref.serializers import Int64, String, Tuple

VISIT = Tuple(String(), Int64(), names=["referrer", "hits"])


@pytest.fixture
def sp_path(tmp_path):
    path = tmp_path / "sp"
    with SavepointWriter(path, chunk_bytes=256) as w:
        source = w.add_operator("source", parallelism=3)
        offsets = source.list_state("offsets", Int64(), DistributionMode.SPLIT_DISTRIBUTE)
        for subtask in (2, 0, 1):
            offsets.add(subtask, [100 * subtask + i for i in range(subtask + 2)])
        source.broadcast_state("rules", String(), Int64()).add_all(["a", "b"], [1, 2])
        counter = w.add_operator("counter", parallelism=2, key_serializer=String())
        counter.keyed_state("count", Int64()).add([f"/k{i}" for i in range(2000)], list(range(2000)))
        counter.keyed_state("visits", VISIT).add(["/a", "/b"], [("/home", 7), {"referrer": "/x", "hits": 1}])
        counter.keyed_state("pairs", Tuple(String(), Int64())).add(["/a"], [("p", 1)])
        counter.keyed_state("odd", Tuple(String(), Int64(), names=["class", "_x"])).add(["/a"], [("q", 2)])
    return path


def test_reprs_are_one_line_summaries_that_do_not_grow_with_the_state(sp_path):
    sp = Savepoint.open(sp_path)
    counter = sp.operator("counter")
    count = counter.keyed_state("count")
    plan = sp.restore_plan(4)
    reprs = {
        "savepoint": repr(sp), "operator": repr(counter), "keyed": repr(count),
        "list": repr(sp.operator("source").list_state("offsets")),
        "broadcast": repr(sp.operator("source").broadcast_state("rules")),
        "plan": repr(plan), "subtask": repr(plan.subtask("counter", 3)),
    }
    for text in reprs.values():
        assert "\n" not in text and len(text) < 200 and "chunks {" not in text
    assert count.info.chunks > 50  # the manifest is long; its repr is not
    assert reprs["keyed"].startswith("<KeyedStateView counter/count [value] int64@v1: 2000 entries in ")
    assert f"{count.info.chunks} chunks, {count.info.stored_bytes} bytes" in reprs["keyed"]
    assert reprs["list"].startswith("<ListStateView source/offsets [SPLIT_DISTRIBUTE] int64@v1: 9 elements in "
                                    "3 partitions")
    assert reprs["operator"].startswith("<OperatorView 'counter' parallelism 2, max parallelism 128; states: "
                                        "0 list, 4 keyed, 0 broadcast; 0 timer services")
    assert sp.savepoint_id in reprs["savepoint"] and "2 operators, 6 states" in reprs["savepoint"]
    assert reprs["plan"].endswith("2 operators, parallelism 2 -> 4, 3 -> 4>")
    assert reprs["subtask"] == "<SubtaskRestore 'counter' subtask 3 of 4: key groups 96-127>"


def test_list_and_broadcast_views_give_tables_in_state_order(sp_path):
    source = Savepoint.open(sp_path).operator("source")
    offsets = source.list_state("offsets").to_arrow()
    assert offsets.column_names == ["subtask", "index", "value"]
    assert offsets.column("subtask").type == pa.int32() and offsets.column("value").type == pa.int64()
    assert offsets.to_pylist() == [{"subtask": s, "index": i, "value": 100 * s + i}
                                   for s in range(3) for i in range(s + 2)]
    rules = source.broadcast_state("rules").to_arrow()
    assert rules.to_pylist() == [{"subtask": s, "index": i, "key": k, "value": v}
                                 for s in range(3) for i, (k, v) in enumerate([("a", 1), ("b", 2)])]


def test_to_pandas_is_the_arrow_table_and_says_when_pandas_is_missing(sp_path, monkeypatch):
    pytest.importorskip("pandas")
    count = Savepoint.open(sp_path).operator("counter").keyed_state("count")
    frame = count.to_pandas()
    assert frame.equals(count.to_arrow().to_pandas()) and len(frame) == 2000
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(InvalidArgumentError, match=r"to_pandas\(\) needs pandas.*to_arrow\(\)") as caught:
        count.to_pandas()
    assert caught.value.state == "counter/count"


def test_named_tuple_fields_are_kept_and_round_trip(sp_path, tmp_path):
    counter = Savepoint.open(sp_path).operator("counter")
    visit = counter.keyed_state("visits").get("/a")
    assert (visit.referrer, visit.hits) == ("/home", 7) and visit == ("/home", 7)
    assert visit._fields == ("referrer", "hits")
    assert counter.keyed_state("visits").get("/b")._asdict() == {"referrer": "/x", "hits": 1}
    assert type(counter.keyed_state("pairs").get("/a")) is tuple  # positional: a plain tuple
    assert type(counter.keyed_state("odd").get("/a")) is tuple  # names that cannot be attributes
    rows = list(counter.keyed_state("visits").items())
    copy = tmp_path / "copy"
    with SavepointWriter(copy) as w:
        w.add_operator("counter", parallelism=2, key_serializer=String()).keyed_state("visits", VISIT).add(
            [k for k, _ in rows], [v for _, v in rows])
    assert list(Savepoint.open(copy).operator("counter").keyed_state("visits").items()) == rows


def test_descriptions_are_dataclasses_whose_dicts_are_the_cli_json(sp_path, capsys):
    sp = Savepoint.open(sp_path)
    info = describe(sp, subtasks=True)
    assert isinstance(info, SavepointInfo) and isinstance(info.operators[1], OperatorInfo)
    states = {s.name: s for s in info.operators[1].states}
    assert isinstance(states["count"], KeyedStateInfo) and states["count"].entries == 2000
    assert isinstance(info.operators[0].states[0], ListStateInfo)
    assert info.operators[0].states[0].elements_per_partition == [2, 3, 4]
    assert sp.operator("counter").keyed_state("count").info == states["count"]
    assert dataclasses.replace(info, operators=[]).operators == []  # plain, frozen dataclasses
    assert main(["inspect", str(sp_path), "--subtasks", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == info.to_dict()
    assert printed["operators"][1]["states"][1]["type"] == "keyed"
    assert "user_key_serializer" not in printed["operators"][1]["states"][1]  # optional fields left out

    summary = sp.restore_plan({"counter": 4}).summary()
    assert isinstance(summary, PlanSummary)
    assert [s.first_key_group for s in summary.operators[1].subtasks] == [0, 32, 64, 96]
    assert main(["plan", str(sp_path), "--operator", "counter=4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == summary.to_dict()


def test_writes_return_the_new_savepoint_open(sp_path, tmp_path):
    """rescale and migrate_state return the savepoint they committed, as open() would give it."""
    rescaled = rescale(sp_path, tmp_path / "p4", 4)
    reopened = Savepoint.open(tmp_path / "p4")
    assert isinstance(rescaled, Savepoint) and rescaled.version == reopened.version
    assert rescaled.info == reopened.info and rescaled.info.data_bytes == 0 and len(rescaled.info.bases) == 1
    assert rescaled.operator("counter").parallelism == 4
    migrated = migrate_state(sp_path, tmp_path / "m", "counter", "count", Int64(), copy=True)
    assert migrated.info == Savepoint.open(tmp_path / "m").info and not migrated.info.bases
    w = SavepointWriter(str(tmp_path / "w"))
    w.add_operator("counter", parallelism=2, key_serializer=String()).keyed_state("count", Int64()).add(["a"], [3])
    committed = w.commit()
    assert isinstance(committed, Savepoint) and committed.info == Savepoint.open(tmp_path / "w").info
    assert committed.operator("counter").keyed_state("count").get("a") == 3


def test_a_lookup_key_of_another_type_names_the_state(tmp_path):
    """The int32 serializer's refusal of a str key named no state."""
    from pyref.serializers import Int32, TimeWindow, Window

    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", 2, key_serializer=Int32())
        op.keyed_state("count", Int64()).add([5], [1])
        op.keyed_state("windowed", Int64(), namespace_serializer=TimeWindow()).add([5], [1], namespaces=[Window(0, 9)])
    op = Savepoint.open(tmp_path / "sp").operator("op")
    with pytest.raises(InvalidArgumentError, match=r"int32 .* str \[state=op/count\]"):
        op.keyed_state("count").get("5")
    with pytest.raises(InvalidArgumentError, match=r"\[state=op/windowed\]"):
        op.keyed_state("windowed").get(5, namespace="not a window")


@pytest.mark.parametrize("parallelism", ["3", None, 2.0, {"op": "3"}])
def test_a_parallelism_that_is_not_a_whole_number_is_refused(tmp_path, parallelism):
    """A str parallelism raised TypeError ('>' between str and int) in rescale and restore_plan."""
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", 2).list_state("s", Int64()).add(0, [1])
    with pytest.raises(InvalidArgumentError, match="parallelism must be an integer"):
        rescale(tmp_path / "sp", tmp_path / "sp3", parallelism)
    with pytest.raises(InvalidArgumentError, match="parallelism must be an integer"):
        Savepoint.open(tmp_path / "sp").restore_plan(parallelism)
