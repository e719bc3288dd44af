"""Flink SQL state (the table runtime's RowData serializers) read, imported and exported.

The fixtures under data/sql are real canonical savepoints of compat_tests/flink's SQL job
(jobs/SqlJob.java: a group aggregate, a TUMBLE window aggregate with pending windows, a join
under STATE_TTL), one of Flink 2.3.0 (HashMap backend) and one of 1.20.3 (RocksDB), state
inlined in ``_metadata``."""

from __future__ import annotations

import pathlib

import pytest

from compat_tests.flink.sql import TTL_DEFAULT, keyed_contents
from pyref.cli import main as pyref_cli
from pyref.errors import CorruptSavepointError
from pyref.flink import FlinkSavepoint, export_savepoint, import_flink
from pyref.flink.datainput import DataInput
from pyref.flink.serializers import at_position, read_versioned_snapshot
from pyref.flink.values import codec_for, decode_cell
from pyref.testing.flink_bytes import LONG, i32, i64, snapshot, utf

DATA = pathlib.Path(__file__).resolve().parent / "data" / "sql"
SAVEPOINTS = {"2.3.0": DATA / "2.3.0-hashmap", "1.20.3": DATA / "1.20.3-rocksdb"}
_T = "org.apache.flink.table.runtime.typeutils."
ROW_DATA = _T + "RowDataSerializer$RowDataSerializerSnapshot"
STRING_DATA = _T + "StringDataSerializer$StringDataSerializerSnapshot"


def stored_types(path: pathlib.Path) -> dict[str, tuple[str, str, str]]:
    with FlinkSavepoint.open(path) as savepoint:
        return {name: (op.key_type.describe(), op.keyed_state(name).stored_type.describe(),
                       op.keyed_state(name).namespace_type.describe())
                for op in savepoint.operators for name in op.keyed_state_names}


@pytest.mark.parametrize("version", sorted(SAVEPOINTS))
def test_sql_state_has_row_types_from_the_field_serializers(version):
    assert stored_types(SAVEPOINTS[version]) == {
        "accState": ("row-data<string-data>", "row-data<int64,int64,string-data>", "void-namespace"),
        "window-aggs": ("row-data<string-data>", "row-data<int64,int64>", "int64"),
        "left-records": ("row-data<string-data,int64>", "map<row-data<string-data,int64>,ttl<int32>>",
                         "void-namespace"),
        "right-records": ("row-data<string-data,int64>", "map<row-data<string-data,int64,int64>,ttl<int32>>",
                          "void-namespace"),
    }
    assert pyref_cli(["verify", str(SAVEPOINTS[version])]) == 0


@pytest.mark.parametrize("version", sorted(SAVEPOINTS))
def test_import_and_export_keep_rowdata_keys_values_and_key_groups_exactly(version, tmp_path):
    import_flink(SAVEPOINTS[version], tmp_path / "pyref", ttl_default=TTL_DEFAULT)
    assert pyref_cli(["verify", str(tmp_path / "pyref")]) == 0
    export_savepoint(tmp_path / "pyref", tmp_path / "flink", flink_version=version)
    original = keyed_contents(SAVEPOINTS[version])
    assert sum(map(len, original.values())) > 80
    assert keyed_contents(tmp_path / "flink") == original


def java_stream(*class_names: str) -> bytes:
    """Bytes shaped like an ObjectOutputStream of a LogicalType: a class descriptor's name
    (writeUTF) and serialVersionUID, which also looks like a versioned snapshot."""
    return b"\xac\xed\x00\x05\x73\x72" + b"".join(utf(name) + i64(1) + b"\x02\x00\x01Z\x00" for name in class_names) + b"\x78"


def test_rowdata_snapshot_steps_over_the_java_types_to_its_field_serializers():
    body = i32(2) + java_stream("org.apache.flink.table.types.logical.VarCharType") + java_stream(
        "org.apache.flink.table.types.logical.BigIntType") + i32(1333245) + i32(1) + i32(2) + snapshot(
        STRING_DATA) + snapshot(LONG)
    data = snapshot(ROW_DATA, 3, body) + b"after"
    inp = DataInput(data)
    parsed = read_versioned_snapshot(inp, at_position(len(data) - 5))
    assert (parsed.describe(), parsed.snapshot, inp.pos) == ("row-data<string-data,int64>", data[:-5], len(data) - 5)
    # A row's value: its BinaryRowData length first, kept as Flink's bytes.
    cell = i32(3) + b"row"
    assert decode_cell(codec_for(parsed), cell) == cell
    with pytest.raises(CorruptSavepointError, match="bytes left"):
        decode_cell(codec_for(parsed), cell + b"x")
