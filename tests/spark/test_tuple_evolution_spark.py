"""Tuple schema evolution (spec/serializers.md §5.3) through the Spark ``migrate`` job and
``pyref migrate``, whose serializer label gives an added field's default after ``=``."""

from __future__ import annotations

import pytest

from pyref import IncompatibleSerializerError, InvalidArgumentError, Savepoint, SavepointWriter
from pyref.cli import main
from pyref.serializers import Int32, Int64, ListOf, Nullable, String, Tuple
from pyref.spark.cli import parse_serializer

OLD = Tuple(String(), Int32(), names=("url", "n"))
NEW = Tuple(String(), Int32(), Int64(), names=("url", "n", "ts"), defaults={"ts": 0})


def test_a_label_gives_defaults_as_json_after_an_equals_sign():
    parsed = parse_serializer('tuple<url:string, n:int32, ts:int64=0, tag:nullable<string>="a b">@v2')
    assert parsed.names == ("url", "n", "ts", "tag") and parsed.defaults == {"ts": 0, "tag": "a b"}
    assert parse_serializer("tuple<string,int32,int64=-1>").defaults == {"f2": -1}
    nested = parse_serializer("list<tuple<a:int32,b:nullable<string>=null>@v2>")
    assert isinstance(nested, ListOf) and nested.element.defaults == {"b": None}
    assert parse_serializer("tuple<url:string,n:int32>@v2").defaults == {}


@pytest.mark.parametrize("serializer", [OLD, Tuple(String(), Int32()), ListOf(Nullable(OLD))], ids=repr)
def test_the_label_inspect_prints_parses_back_to_the_serializer(serializer):
    """So a user copies the stored label from ``pyref inspect`` and appends the new field."""
    from pyref.descriptions import serializer_label

    assert parse_serializer(serializer_label(serializer.snapshot())) == serializer


def test_a_field_appended_to_the_inspected_label_is_the_new_serializer():
    from pyref.descriptions import serializer_label

    label = serializer_label(OLD.snapshot())
    assert label == "tuple<url:string@v1,n:int32@v1>@v2"
    grown = parse_serializer(label.replace(">@v2", ",ts:int64@v1=0>@v2"))
    assert grown == NEW and grown.defaults == {"ts": 0}


@pytest.mark.parametrize("label, message", [
    ("tuple<a:int32=zz>@v2", "expected a JSON default"),
    ('tuple<a:int32="s">@v2', "default of tuple field 'a'"),
    ("list<int32=3>", "fields of a tuple"),
    ("int64=3", "unexpected '=3'"),
])
def test_a_wrong_default_is_an_argument_error(label, message):
    with pytest.raises(InvalidArgumentError, match=message):
        parse_serializer(label)


@pytest.fixture(scope="module")
def visits(tmp_path_factory):
    """Tuple values in a keyed value state and a keyed list state, over several chunks."""
    path = tmp_path_factory.mktemp("evolution") / "visits"
    with SavepointWriter(str(path), chunk_bytes=512, inline_bytes=0) as w:
        op = w.add_operator("tracker", parallelism=2, key_serializer=Int64())
        op.keyed_state("last", OLD).add(list(range(200)), [(f"/p/{i}", i) for i in range(200)])
        op.keyed_state("trail", Nullable(OLD), kind="list").add([1, 2], [[("/a", 1), None], []])
    return path


@pytest.mark.spark
def test_spark_migrate_adds_a_field_with_its_default(spark, visits):
    from pyref.spark import migrate_state

    target = visits.parent / "with-ts"
    migrate_state(spark, visits, target, "tracker", "last", NEW, progress=False)
    op = Savepoint.open(target).operator("tracker")
    assert dict(op.keyed_state("last", NEW).items()) == {i: (f"/p/{i}", i, 0) for i in range(200)}
    trail = Tuple(String(), names=("url",))  # n removed, through nullable and the per-key list
    migrate_state(spark, target, visits.parent / "no-n", "tracker", "trail", Nullable(trail), progress=False)
    view = Savepoint.open(visits.parent / "no-n").operator("tracker").keyed_state("trail", Nullable(trail))
    assert dict(view.items()) == {1: [("/a",), None], 2: []}


@pytest.mark.spark
def test_pyref_migrate_takes_the_default_from_the_label_and_refuses_without_one(spark, visits, capsys):
    target = visits.parent / "cli-ts"
    code = main(["migrate", str(visits), str(target), "--operator", "tracker", "--state", "last",
                 "--serializer", "tuple<url:string,n:int32,ts:int64=-1>@v2"])
    assert code == 0
    assert Savepoint.open(target).operator("tracker").keyed_state("last", NEW).get(7) == ("/p/7", 7, -1)
    code = main(["migrate", str(visits), str(visits.parent / "cli-bad"), "--operator", "tracker", "--state", "last",
                 "--serializer", "tuple<url:string,n:int32,ts:int64>@v2", "--json"])
    assert code == IncompatibleSerializerError.exit_code
    assert "'ts' has no default" in capsys.readouterr().out
    assert not (visits.parent / "cli-bad" / "_manifest").exists()
    with pytest.raises(IncompatibleSerializerError, match="migrat"):  # the source still needs the migration
        Savepoint.open(visits).operator("tracker").keyed_state("last", NEW)
