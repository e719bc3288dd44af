"""State of Flink's Scala API serializers (flink-scala) read, decoded, imported and exported.

The fixtures under data/scala are real canonical savepoints of compat_tests/flink's scala job
(jobs/compat/scala/1.13/ScalaJob.java: the Scala API's serializers built from Java, at parallelism
2, keyed by 16 Strings, non-ASCII and astral ones among them) taken by Flink 1.14.6 (flink-dist
holds flink-scala, Scala 2.11) and 1.16.3 (flink-scala_2.12), each on the HashMap and the RocksDB
backend, with the job's truth.json (data/scala/README.md)."""

from __future__ import annotations

import json
import pathlib
import tracemalloc

import pytest

from compat_tests.flink.sql import keyed_contents, state_types
from pyref.cli import main as pyref_cli
from pyref.errors import CorruptSavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint, export_savepoint, import_flink, operator_id_of_uid
from pyref.flink.datainput import DataInput
from pyref.flink.serializers import at_position, read_versioned_snapshot, traversable_collection
from pyref.flink.transcode import transcoder
from pyref.flink.values import codec_for, decode_cell
from pyref.serializers import Int64
from pyref.testing.flink_bytes import (composite, i32, i64, inline_handle, meta_info, metadata, operator,
                                      operator_handle, operator_stream, snapshot, subtask, utf)

DATA = pathlib.Path(__file__).resolve().parent / "data" / "scala"
CASES = sorted(p.name for p in DATA.iterdir() if p.is_dir())
#: The keys of the job (TypesJob's: non-ASCII and astral-plane Strings among them).
KEYS = 16
# Spelled here as Flink's sources spell them, not taken from pyref: a typo there must fail here.
_S = "org.apache.flink.api.scala.typeutils."
_STRING = "org.apache.flink.api.common.typeutils.base.StringSerializer$StringSerializerSnapshot"
_LONG = "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
_TUPLE2 = "scala-case-class:scala.Tuple2"
#: Every keyed state of the scala operator: (state, key type, stored type, namespace type), sorted.
STATE_TYPES = sorted([
    ("case-class", "string", "scala-case-class:scala.Tuple3<int32,string,float64>", "void-namespace"),
    ("tuple2", "string", f"{_TUPLE2}<int64,string>", "void-namespace"),
    ("option", "string", f"scala-option<{_TUPLE2}<int64,string>>", "void-namespace"),
    ("option-nothing", "string", "scala-option<scala-nothing>", "void-namespace"),
    ("either", "string", "scala-either<string,int64>", "void-namespace"),
    ("list", "string", f"scala-traversable:scala.collection.immutable.List<{_TUPLE2}<string,int32>>",
     "void-namespace"),
    ("map", "string", f"scala-traversable:scala.collection.immutable.Map<{_TUPLE2}<string,int64>>", "void-namespace"),
    ("enum", "string", "scala-enum:scala.math.BigDecimal$RoundingMode$", "void-namespace"),
    ("try", "string", "scala-try<int64,kryo:java.lang.Throwable>", "void-namespace"),
    ("unit", "string", "scala-unit", "void-namespace"),
    ("options", "string", "list<scala-option<string>>", "void-namespace"),
    ("eithers", "string", "map<string,scala-either<int32,string>>", "void-namespace"),
])


def truth(case: str) -> dict:
    return json.loads((DATA / case / "truth.json").read_text(encoding="utf-8"))["operators"]["scala"]["keyed_state"]


def expected(name: str, value):
    """The job's JSON value (ScalaTypes.json) as pyref decodes it."""
    if name in ("case-class", "tuple2"):
        return tuple(value)
    if name == "option":
        return None if value is None else tuple(value["some"])
    if name == "list":
        return [tuple(e) for e in value]
    if name == "map":
        return dict(map(tuple, value))
    if name == "unit":
        assert value == "unit"
        return None
    if name == "options":
        return None if value is None else value["some"]
    return value  # Option[Nothing]: None; Either: {"left"|"right": v}; the enum's name


@pytest.mark.parametrize("case", CASES)
def test_scala_state_has_its_exact_types_and_inspects_and_verifies_clean(case, capsys):
    assert state_types(DATA / case / "savepoint") == STATE_TYPES
    assert pyref_cli(["inspect", str(DATA / case / "savepoint"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    (scala,) = [op for op in info["operators"] if op["key_type"]]
    assert scala["key_type"] == "string" and len(scala["states"]) == len(STATE_TYPES)
    assert sorted((st["name"], st["flink_type"]) for st in scala["states"]) == [(n, t) for n, _, t, _ in STATE_TYPES]
    assert "refused" not in info["import"]
    assert info["import"]["operators"][scala["operator_id"]]["key_groups"] == "hashed"
    assert pyref_cli(["verify", str(DATA / case / "savepoint"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and not report["warnings"] and report["values"] >= KEYS * len(STATE_TYPES)


@pytest.mark.parametrize("case", CASES)
def test_scala_values_decode_to_the_jobs_truth(case):
    states = truth(case)
    with FlinkSavepoint.open(DATA / case / "savepoint") as savepoint:
        (op,) = [op for op in savepoint.operators if op.keyed_state_names]
        for name in ("case-class", "tuple2", "option", "option-nothing", "either", "list", "map", "enum", "unit"):
            got = dict(op.keyed_state(name).items())
            assert got == {e["key"]: expected(name, e["value"]) for e in states[name]["entries"]}, name
        options = dict(op.keyed_state("options").items())
        assert options == {e["key"]: [expected("options", v) for v in e["value"]] for e in states["options"]["entries"]}
        eithers = {(key, user_key): v for key, user_key, v in op.keyed_state("eithers").items()}
        assert eithers == {(e["key"], k): v for e in states["eithers"]["entries"] for k, v in e["value"]}
        tries = dict(op.keyed_state("try").items())
        for e in states["try"]["entries"]:
            if "success" in e["value"]:
                assert tries[e["key"]] == e["value"]
            else:  # the Throwable as Kryo wrote it (Java serialization inside): bytes naming the failure
                failure = tries[e["key"]]["failure"]
                message = e["value"]["failure"].split(": ", 1)[1]
                assert isinstance(failure, bytes) and message.encode() in failure
        assert sum("failure" in v for v in tries.values()) == 4 and {"left", "right"} <= {
            next(iter(v)) for v in dict(op.keyed_state("either").items()).values()}


@pytest.mark.parametrize("case", CASES)
def test_import_and_export_keep_every_scala_row_exactly(case, tmp_path):
    source = DATA / case / "savepoint"
    import_flink(source, tmp_path / "pyref")
    assert pyref_cli(["verify", str(tmp_path / "pyref")]) == 0
    export_savepoint(tmp_path / "pyref", tmp_path / "flink", flink_version=case.split("-")[0])
    original = keyed_contents(source)
    assert sum(len(rows) for rows in original.values()) == KEYS * (len(STATE_TYPES) + 1)  # the map state: 2 a key
    assert keyed_contents(tmp_path / "flink") == original
    assert state_types(tmp_path / "flink") == STATE_TYPES
    assert stored_snapshots(tmp_path / "flink") == stored_snapshots(source)  # written back byte for byte


def stored_snapshots(path: pathlib.Path) -> dict[str, bytes]:
    """Each keyed state's stored serializer snapshot, as the savepoint holds it."""
    with FlinkSavepoint.open(path) as savepoint:
        return {name: op.keyed_state(name).stored_type.snapshot
                for op in savepoint.operators for name in op.keyed_state_names}


def test_cbf_code_is_text_pyref_reads_but_never_runs():
    code = ("implicitly[scala.collection.generic.CanBuildFrom[scala.collection.immutable.Map[String, (Int, Long)], "
            "(String, (Int, Long)), scala.collection.immutable.Map[String, (Int, Long)]]]")
    assert traversable_collection(code) == "scala.collection.immutable.Map[String, (Int, Long)]"
    for odd in ("", "List()", "CanBuildFrom[", "CanBuildFrom[List]]", "{ sys.exit(1) }"):
        assert traversable_collection(odd) is None
    # Whatever the code says, the values are read by the element's serializer: a list of longs.
    data = composite(_S + "TraversableSerializerSnapshot", [snapshot(_LONG)], utf("{ sys.exit(1) }"), 2)
    type_ = read_versioned_snapshot(DataInput(data), at_position(len(data)))
    assert type_.cbf_code == "{ sys.exit(1) }" and type_.describe() == "scala-traversable:?<int64>"
    assert decode_cell(codec_for(type_), i32(2) + b"\x01" + i64(5) + b"\x00") == [5, None]


def test_scala_enumeration_ids_name_their_values_and_unknown_ids_are_corrupt():
    body = utf("my.Weekday$") + i32(2) + utf("Mon") + i32(10) + utf("Tue") + i32(20)
    data = snapshot(_S + "ScalaEnumSerializerSnapshot", 3, body)
    type_ = read_versioned_snapshot(DataInput(data), at_position(len(data)))
    assert type_.describe() == "scala-enum:my.Weekday$" and type_.length == 4
    assert decode_cell(codec_for(type_), i32(20)) == "Tue"
    with pytest.raises(CorruptSavepointError, match="id 1 is none of"):
        decode_cell(codec_for(type_), i32(1))
    twice = snapshot(_S + "ScalaEnumSerializerSnapshot", 3, utf("my.E$") + i32(2) + (utf("A") + i32(0)) * 2)
    with pytest.raises(CorruptSavepointError, match="twice"):
        read_versioned_snapshot(DataInput(twice), at_position(len(twice)))


def test_hostile_scala_snapshots_fail_typed():
    # A case class snapshot cut inside its class name; an Option with two nested serializers.
    cut = composite(_S + "ScalaCaseClassSerializerSnapshot", [snapshot(_STRING)], utf("scala.Tuple1"), 2)[:-30]
    with pytest.raises(CorruptSavepointError):
        read_versioned_snapshot(DataInput(cut), at_position(len(cut)))
    two = composite(_S + "ScalaOptionSerializerSnapshot", [snapshot(_STRING), snapshot(_STRING)])
    with pytest.raises(CorruptSavepointError, match="expected 1"):
        read_versioned_snapshot(DataInput(two), at_position(len(two)))
    # A collection claiming 2^31-1 elements in 5 bytes, a Unit that is not 0, a value of Nothing.
    traversable = composite(_S + "TraversableSerializerSnapshot", [snapshot(_LONG)], utf("x"), 2)
    codec = codec_for(read_versioned_snapshot(DataInput(traversable), at_position(len(traversable))))
    with pytest.raises(CorruptSavepointError):
        decode_cell(codec, i32(2**31 - 1) + b"\x01")
    unit = snapshot(_S + "UnitSerializer$UnitSerializerSnapshot")
    with pytest.raises(CorruptSavepointError, match="Unit"):
        decode_cell(codec_for(read_versioned_snapshot(DataInput(unit), at_position(len(unit)))), b"\x07")
    nothing = composite(_S + "ScalaOptionSerializerSnapshot", [snapshot(_S + "NothingSerializerSnapshot")])
    with pytest.raises(CorruptSavepointError, match="Nothing"):
        decode_cell(codec_for(read_versioned_snapshot(DataInput(nothing), at_position(len(nothing)))), b"\x01")


def test_pyref_values_are_not_written_as_scala_values():
    """A pyref int64 is no Scala Option: a state whose Flink snapshot is the Scala API's keeps Flink's bytes."""
    data = composite(_S + "ScalaOptionSerializerSnapshot", [snapshot(_LONG)])
    type_ = read_versioned_snapshot(DataInput(data), at_position(len(data)))
    with pytest.raises(UnsupportedFormatError, match="scala-option<int64> values are only kept as opaque bytes"):
        transcoder(Int64(), type_, "state")


def nested(*snapshots: bytes) -> bytes:
    """``NestedSerializersSnapshotDelegate``: magic, version 1, count, the snapshots."""
    return i32(1333245) + i32(1) + i32(len(snapshots)) + b"".join(snapshots)


@pytest.mark.parametrize("data, described", [
    # Before CompositeTypeSerializerSnapshot's version 3 the snapshot version was the outer
    # version, and neither the magic nor the outer version was written.
    (snapshot(_S + "ScalaCaseClassSerializerSnapshot", 2,
              utf("scala.Tuple2") + nested(snapshot(_LONG), snapshot(_STRING))),
     "scala-case-class:scala.Tuple2<int64,string>"),
    (snapshot(_S + "ScalaOptionSerializerSnapshot", 1, nested(snapshot(_LONG))), "scala-option<int64>"),
    (snapshot(_S + "TraversableSerializerSnapshot", 2, utf("implicitly[CanBuildFrom[List[Long], Long, List[Long]]]")
              + nested(snapshot(_LONG))), "scala-traversable:List<int64>"),
])
def test_scala_snapshots_of_the_legacy_composite_versions_parse_exactly(data, described):
    type_ = read_versioned_snapshot(DataInput(data), at_position(len(data)))
    assert type_.describe() == described and type_.snapshot == data


def test_case_classes_of_no_bytes_cost_one_object_not_one_per_field(tmp_path):
    """A case class without fields takes no bytes: a list state of collections of a case class of
    1000 of them (each element one presence byte) cost 1000 objects a byte to decode and again to
    make Arrow columns (200 KB: 250 s, 800 MB). Its one value is built once; to Arrow, values
    needing more than 2 objects a stored byte stay Flink's bytes."""
    empty = composite(_S + "ScalaCaseClassSerializerSnapshot", [], utf("scala.Tuple0"), 2)
    wide = composite(_S + "ScalaCaseClassSerializerSnapshot", [empty] * 1000, utf("my.Wide"), 2)
    elements = composite(_S + "TraversableSerializerSnapshot", [wide], utf("x"), 2)
    meta = meta_info("wide", 1, {"OPERATOR_STATE_DISTRIBUTION_MODE": "SPLIT_DISTRIBUTE"}, {"VALUE_SERIALIZER": elements})
    stream, offsets = operator_stream([(meta, [i32(5000) + b"\x01" * 5000] * 10)])
    handle = operator_handle({"wide": (0, offsets[0])}, inline_handle(stream))
    (tmp_path / "_metadata").write_bytes(metadata([operator(bytes.fromhex(operator_id_of_uid("src")), 1, 128,
                                                            [subtask(0, handle)])]))
    tracemalloc.start()
    try:
        with FlinkSavepoint.open(tmp_path, uids=["src"]) as sp:
            view = sp.operator("src").list_state("wide")
            values = view.elements()
            table = view.to_arrow()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(values) == 10 and all(len(v) == 5000 and v[0] == v[-1] == ((),) * 1000 for v in values)
    assert table.schema.field("element").metadata  # kept as Flink's bytes
    assert peak < 24 << 20  # a thousand objects a byte before: gigabytes
