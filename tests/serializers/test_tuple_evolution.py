"""Tuple schema evolution (spec/serializers.md §5.3): fields added with a default, removed or
moved are compatible after migration; a migration rewrites every value, a reader refuses the
state until then."""

from __future__ import annotations

import pathlib
import re

import pyarrow as pa
import pytest

from pyref import SavepointWriter, migrate_state
from pyref.errors import CorruptSavepointError, IncompatibleSerializerError, InvalidArgumentError
from pyref.reader import Savepoint
from pyref.serializers import (
    Bytes,
    Compatibility,
    Int32,
    Int64,
    ListOf,
    MapOf,
    Nullable,
    String,
    Tuple,
    migrate_array,
    resolve_compatibility,
)
from pyref.serializers.base import serializer_from_snapshot
from pyref import TtlConfig
from tests.serializers.serializer_spec_tables import spec_hex_examples

AS_IS = Compatibility.COMPATIBLE_AS_IS
MIGRATE = Compatibility.COMPATIBLE_AFTER_MIGRATION
INCOMPATIBLE = Compatibility.INCOMPATIBLE

OLD = Tuple(String(), Int32(), names=("url", "n"))


def resolve(new):
    return resolve_compatibility(OLD.snapshot(), new)


def migrated(old, new, values):
    """The encodings of ``values`` (written with ``old``) after migrating them to ``new``."""
    return migrate_array(old, new, old.encode_array(values)).to_pylist()


def test_the_examples_of_the_spec_are_what_a_migration_writes():
    """Every hex cell of §5.3's table, computed from the rows' serializers."""
    changed = [
        Tuple(String(), Int32(), Int64(), names=("url", "n", "ts"), defaults={"ts": 0}),
        Tuple(String(), Int32(), Nullable(String()), names=("url", "n", "tag"), defaults={"tag": None}),
        Tuple(Int32(), names=("n",)),
        Tuple(Int64(), String(), names=("n", "url")),
        Tuple(String(), Int32(), names=("path", "n")),
    ]
    assert resolve(changed[-1]).kind is AS_IS
    assert all(resolve(new).kind is MIGRATE for new in changed[:-1])
    computed = {" ".join(f"{b:02x}" for b in migrated(OLD, new, [("a", 5)])[0]) for new in changed}
    assert computed == spec_hex_examples("5.3")


def test_an_added_field_takes_its_default_and_kept_fields_their_values():
    new = Tuple(String(), Int32(), Int64(), names=("url", "n", "ts"), defaults={"ts": -1})
    r = resolve(new)
    assert r.kind is MIGRATE and r.serializer is new and "ts" in r.reason
    out = migrated(OLD, new, [("a", 5), ("", -7)])
    assert [new.decode(b) for b in out] == [("a", 5, -1), ("", -7, -1)]


def test_added_fields_anywhere_removed_and_moved_fields_are_matched_by_name():
    new = Tuple(Int32(), String(), String(), names=("n", "host", "url"), defaults={"host": "h"})
    assert resolve(new).kind is MIGRATE
    assert [new.decode(b) for b in migrated(OLD, new, [("a", 5)])] == [(5, "h", "a")]
    removed = Tuple(String(), names=("url",))
    assert [removed.decode(b) for b in migrated(OLD, removed, [("a", 5)])] == [("a",)]


def test_moving_a_named_field_at_equal_arity_is_a_migration_not_a_rename():
    """Before §5.3 this swap was AS_IS and silently exchanged the two fields' values."""
    old = Tuple(Int32(), Int32(), names=("a", "b"))
    new = Tuple(Int32(), Int32(), names=("b", "a"))
    r = resolve_compatibility(old.snapshot(), new)
    assert r.kind is MIGRATE and "reordered" in r.reason
    assert [new.decode(b) for b in migrated(old, new, [(1, 2)])] == [(2, 1)]


def test_renaming_without_moving_stays_as_is():
    assert resolve(Tuple(String(), Int32(), names=("path", "count"))).kind is AS_IS


def test_an_added_field_without_a_default_is_incompatible_naming_it():
    r = resolve(Tuple(String(), Int32(), Int64(), names=("url", "n", "ts")))
    assert r.kind is INCOMPATIBLE and "'ts' has no default" in r.reason


def test_a_kept_field_of_another_type_is_incompatible_naming_it():
    r = resolve(Tuple(String(), String(), Int64(), names=("url", "n", "ts"), defaults={"ts": 0}))
    assert r.kind is INCOMPATIBLE and "field 'n'" in r.reason and "int32 to string" in r.reason


def test_a_kept_field_is_migrated_with_the_others():
    new = Tuple(Int64(), names=("n",))
    assert resolve(new).kind is MIGRATE
    assert migrated(OLD, new, [("a", 5)]) == [bytes.fromhex("05 00 00 00 00 00 00 00")]


def test_positional_tuples_gain_and_lose_trailing_fields_by_position():
    old = Tuple(String(), Int32())
    grown = Tuple(String(), Int32(), Int32(), defaults={"f2": 9})
    assert [grown.decode(b) for b in migrated(old, grown, [("a", 1)])] == [("a", 1, 9)]
    shrunk = Tuple(String())
    assert [shrunk.decode(b) for b in migrated(old, shrunk, [("a", 1)])] == [("a",)]
    # A named new tuple over positional values: fields by position too; the names are new.
    named = Tuple(String(), Int32(), Int64(), names=("url", "n", "ts"), defaults={"ts": 0})
    assert resolve_compatibility(old.snapshot(), named).kind is MIGRATE
    assert [named.decode(b) for b in migrated(old, named, [("a", 1)])] == [("a", 1, 0)]


def test_a_version_1_snapshot_evolves_by_position():
    v1 = OLD.snapshot()
    v1.version = 1
    del v1.field_names[:]
    new = Tuple(String(), Int32(), Int64(), names=("url", "n", "ts"), defaults={"ts": 3})
    assert resolve_compatibility(v1, new).kind is MIGRATE
    old = serializer_from_snapshot(v1)
    assert [new.decode(b) for b in migrated(old, new, [("a", 1)])] == [("a", 1, 3)]


def test_defaults_are_checked_when_the_tuple_is_made():
    with pytest.raises(InvalidArgumentError, match=r"name no field: \['tz'\]"):
        Tuple(String(), Int64(), names=("url", "ts"), defaults={"tz": 0})
    with pytest.raises(InvalidArgumentError, match="default of tuple field 'ts'"):
        Tuple(String(), Int64(), names=("url", "ts"), defaults={"ts": "soon"})


def test_defaults_are_not_part_of_the_snapshot():
    plain = Tuple(String(), Int64(), names=("url", "ts"))
    defaulted = Tuple(String(), Int64(), names=("url", "ts"), defaults={"ts": 0})
    assert defaulted.snapshot() == plain.snapshot() and defaulted == plain
    assert "defaults={'ts': 0}" in repr(defaulted)


def test_tuples_evolve_inside_nullable_list_and_map():
    new = Tuple(String(), Int32(), Int64(), names=("url", "n", "ts"), defaults={"ts": 0})
    assert migrated(Nullable(OLD), Nullable(new), [None, ("a", 1)])[0] == b"\x00"
    lists = migrated(ListOf(OLD), ListOf(new), [[("a", 1), ("b", 2)], []])
    assert [ListOf(new).decode(b) for b in lists] == [[("a", 1, 0), ("b", 2, 0)], []]
    maps = migrated(MapOf(OLD, OLD), MapOf(new, new), [{("k", 1): ("v", 2)}])
    assert MapOf(new, new).decode(maps[0]) == {("k", 1, 0): ("v", 2, 0)}
    outer_old, outer_new = Tuple(OLD, Int32(), names=("t", "x")), Tuple(new, Int32(), names=("t", "x"))
    assert outer_new.decode(migrated(outer_old, outer_new, [(("a", 1), 2)])[0]) == (("a", 1, 0), 2)


def test_map_keys_that_become_equal_fail_naming_the_record():
    keys = MapOf(OLD, Int32())
    with pytest.raises(IncompatibleSerializerError, match="record 0 .*duplicate key"):
        migrated(keys, MapOf(Tuple(Int32(), names=("n",)), Int32()), [{("a", 1): 1, ("b", 1): 2}])


# -- savepoints -----------------------------------------------------------------------------


NEW = Tuple(String(), Int32(), Int64(), names=("url", "n", "ts"), defaults={"ts": 0})


def _write(path, **state_options):
    with SavepointWriter(str(path), inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=2, key_serializer=String())
        op.keyed_state("visits", OLD).add(["k1", "k2"], [("a", 1), ("b", 2)])
        op.list_state("recent", OLD).add(0, [("c", 3)])
        op.keyed_state("history", OLD, kind="list", **state_options).add(
            ["k1"], [[("d", 4), ("e", 5)]], **({"ttl_timestamps": [[10, 11]]} if state_options else {}))


def test_reading_with_the_new_serializer_is_refused_until_the_state_is_migrated(tmp_path):
    _write(tmp_path / "sp")
    op = Savepoint.open(tmp_path / "sp").operator("op")
    with pytest.raises(IncompatibleSerializerError, match="migrat") as info:
        op.keyed_state("visits", NEW)
    assert info.value.state == "op/visits"
    with pytest.raises(IncompatibleSerializerError, match="migrat"):
        op.list_state("recent", NEW)
    assert dict(op.keyed_state("visits", OLD).items()) == {"k1": ("a", 1), "k2": ("b", 2)}


def test_migrate_state_adds_the_field_to_keyed_list_and_keyed_list_states(tmp_path):
    _write(tmp_path / "sp")
    source = tmp_path / "sp"
    for state in ("visits", "recent", "history"):  # one state per migration, each from the previous result
        migrate_state(source, tmp_path / f"sp-{state}", "op", state, NEW, copy=True)
        source = tmp_path / f"sp-{state}"
    op = Savepoint.open(tmp_path / "sp-history").operator("op")
    assert dict(op.keyed_state("visits", NEW).items()) == {"k1": ("a", 1, 0), "k2": ("b", 2, 0)}
    assert list(op.list_state("recent", NEW).partition(0)) == [("c", 3, 0)]
    assert dict(op.keyed_state("history", NEW).items()) == {"k1": [("d", 4, 0), ("e", 5, 0)]}
    assert op.keyed_state("visits").value_serializer == NEW  # the stored snapshot is the new tuple's


def test_migrate_state_keeps_ttl_timestamps_of_evolved_tuples(tmp_path):
    _write(tmp_path / "sp", ttl=TtlConfig(100))
    migrate_state(tmp_path / "sp", tmp_path / "sp2", "op", "history", NEW)
    view = Savepoint.open(tmp_path / "sp2").operator("op").keyed_state("history", NEW)
    assert view.get("k1", with_ttl=True) == [(10, ("d", 4, 0)), (11, ("e", 5, 0))]


def test_an_incompatible_change_is_a_typed_error_and_writes_nothing(tmp_path):
    _write(tmp_path / "sp")
    with pytest.raises(IncompatibleSerializerError, match="'ts' has no default") as info:
        migrate_state(tmp_path / "sp", tmp_path / "sp2", "op", "visits", Tuple(String(), Int32(), Int64(),
                                                                               names=("url", "n", "ts")))
    assert info.value.state == "op/visits"
    assert not (tmp_path / "sp2" / "_manifest").exists()


def test_the_readme_workflow_runs_as_written(tmp_path, capsys):
    """README.md, "Schema evolution": add a field to a tuple state and migrate (paths swapped)."""
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Schema evolution: adding a field to a tuple state\n.*?```python\n(.*?)```", readme,
                      re.S).group(1)
    exec(compile(block.replace("/savepoints/", f"{tmp_path}/"), "README.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == ["Record(url='/b', n=5, ts=0)"]


# -- the column path (pyref.serializers.tuple_columns) ---------------------------------------

RICH = Tuple(String(), Nullable(String()), Int32(), ListOf(Int64()), names=("url", "tag", "n", "seen"))


def _rich_values(n):
    return [(f"/p/{i}" * (i % 3), None if i % 4 == 0 else "é" * (i % 5), i - n // 2, list(range(i % 4)))
            for i in range(n)]


@pytest.mark.parametrize("new", [
    Tuple(ListOf(Int64()), Int64(), String(), Nullable(Int32()), names=("seen", "n", "url", "extra"),
          defaults={"extra": None}),
    Tuple(Nullable(String()), Int32(), Bytes(), names=("tag", "n", "blob"), defaults={"blob": b"\x00\xff"}),
    Tuple(String(), Nullable(String()), Int32(), ListOf(Int64()), Int32(), names=("url", "tag", "n", "seen", "v"),
          defaults={"v": 7}),
], ids=["moved-widened-added", "removed-and-added", "appended"])
def test_the_column_path_writes_what_the_value_path_writes(new):
    values = _rich_values(300)
    encoded = RICH.encode_array(values)
    convert = new.value_converter(RICH)
    by_value = [new.encode(convert(RICH.decode(b))) for b in encoded.to_pylist()]
    column = new.migrate_column(RICH, encoded)
    assert column is not None and column.to_pylist() == by_value
    assert new.migrate_column(RICH, encoded.slice(100, 50)).to_pylist() == by_value[100:150]  # an offset slice
    assert new.migrate_column(RICH, RICH.encode_array([])).to_pylist() == []


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-1], "record 1: field 'seen' needs"),
    (lambda b: b + b"\x00", "record 1: 1 trailing bytes"),
    (lambda b: b[:2], "record 1: truncated length prefix of field 'url'"),
    (lambda b: b[:4] + b"\xff" + b[5:], "record 1"),  # not UTF-8, in the field the migration removes
])
def test_the_column_path_refuses_corrupt_values_naming_the_record(damage, message):
    good = RICH.encode_array(_rich_values(3)).to_pylist()
    broken = pa.array([good[0], damage(good[1]), good[2]], pa.binary())
    without_url = Tuple(Nullable(String()), Int32(), ListOf(Int64()), names=("tag", "n", "seen"))
    with pytest.raises(CorruptSavepointError, match=message):
        migrate_array(RICH, without_url, broken)
