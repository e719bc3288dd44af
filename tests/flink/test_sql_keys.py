"""Flink SQL keys' key groups: ``BinaryRowData.hashCode`` (MurmurHash3 of the row's 4-byte
words, seed 42) reproduced, checked against every key and timer Flink stored in the committed
SQL savepoints (data/sql: Flink 2.3.0 HashMap, 1.20.3 RocksDB; see test_sql_state.py), and
used where pyref places SQL keys itself: the import checks every key, the writer places new
ones (spec/key-groups.md §11)."""

from __future__ import annotations

import gzip
import json
import pathlib
import random
import struct

import numpy as np
import pyarrow as pa
import pytest

from compat_tests.flink.sql import TTL_DEFAULT
from pyref import Savepoint, SavepointWriter
from pyref.cli import main as pyref_cli
from pyref.errors import CorruptSavepointError, InvalidArgumentError
from pyref.flink import FlinkSavepoint, import_flink
from pyref.flink.row_keys import binary_row_hash, row_key_groups
from pyref.key_groups import murmur_hash

DATA = pathlib.Path(__file__).resolve().parent / "data" / "sql"
FIXTURES = ["2.3.0-hashmap", "1.20.3-rocksdb"]
#: spec/key-groups.md §11's worked example: the key 'k0' of a ROW<STRING> key, as Flink stored it.
K0 = bytes.fromhex("00000010" "0000000000000000" "6b30000000000082")


@pytest.fixture(scope="module")
def savepoints(tmp_path_factory) -> dict[str, pathlib.Path]:
    paths = {}
    for name in FIXTURES:
        paths[name] = tmp_path_factory.mktemp(name)
        (paths[name] / "_metadata").write_bytes(gzip.decompress((DATA / name / "_metadata.gz").read_bytes()))
    return paths


def stored_rows(path: pathlib.Path):
    """(operator, state, key type, max parallelism, table with key and key_group) of every
    keyed state and timer queue."""
    with FlinkSavepoint.open(path) as savepoint:
        for op in savepoint.operators:
            tables = [(name, op.keyed_state(name).to_arrow(raw=True)) for name in op.keyed_state_names]
            tables += [(f"{domain}/{service}", op.timers(service, domain).to_arrow(raw=True))
                       for service, domain in op.timer_services]
            for name, table in tables:
                yield op.operator_id, name, op.key_type.describe(), op.max_parallelism, table


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_sql_key_flink_stored_sits_in_the_key_group_of_its_binary_row_hash(fixture, savepoints):
    checked = 0
    for op, name, key_type, max_parallelism, table in stored_rows(savepoints[fixture]):
        assert key_type.startswith("row-data"), (op, name)
        groups = row_key_groups(table.column("key"), max_parallelism, f"{op}/{name}")
        assert groups.tolist() == table.column("key_group").to_pylist(), (op, name)
        checked += len(groups)
    assert checked == 465  # keyed rows and timers of 13 key types, from 1 to 24-byte rows with strings inline


@pytest.mark.parametrize("fixture", FIXTURES)
def test_verify_recomputes_every_sql_keys_key_group(fixture, savepoints, capsys):
    assert pyref_cli(["verify", str(savepoints[fixture]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["keys_checked"] == 465


def reference_hash(row: bytes) -> int:
    """BinaryRowData.hashCode spelled out as Flink's MurmurHashUtils.hashBytesByWords does it."""
    mask, h = 0xFFFFFFFF, 42
    for (word,) in struct.iter_unpack("<I", row):
        k = word * 0xCC9E2D51 & mask
        k = (k << 15 | k >> 17) * 0x1B873593 & mask
        h ^= k
        h = ((h << 13 | h >> 19) & mask) * 5 + 0xE6546B64 & mask
    h ^= len(row)
    for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = (h ^ h >> shift) * factor & mask
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def test_the_worked_example_of_the_spec():
    assert binary_row_hash(K0[4:]) == reference_hash(K0[4:]) == 340790665  # 0x14500d89
    assert murmur_hash(340790665) == 1499977672 and 1499977672 % 128 == 72
    assert row_key_groups(pa.array([K0]), 128).tolist() == [72]


def test_vectorised_hash_is_the_definition_for_ragged_repeated_and_long_rows():
    rng = random.Random(7)
    rows = [rng.randbytes(8 * rng.randrange(0, 40)) for _ in range(300)]
    rows += [rows[5]] * 50 + [bytes(8)] * 3 + [rng.randbytes(8 * 2000)]  # runs (namespaces), a long row
    cells = pa.array([struct.pack(">i", len(r)) + r for r in rows], pa.binary())
    expected = [murmur_hash(reference_hash(r)) % 1000 for r in rows]
    assert row_key_groups(cells, 1000).tolist() == expected
    assert row_key_groups(pa.chunked_array([cells.slice(0, 100), cells.slice(100)]), 1000).tolist() == expected


@pytest.mark.parametrize("cell, what", [
    (b"\x00\x00", "too short"),
    (b"\x00\x00\x00\x10" + bytes(8), "give a row of 16 bytes, but 8 follow"),
    (b"\x00\x00\x00\x06" + bytes(6), "give a row of 6 bytes"),
    (b"\xff\xff\xff\xf8" + bytes(8), "give a row of -8 bytes"),
])
def test_a_malformed_sql_key_is_corrupt_naming_the_state(cell, what):
    with pytest.raises(CorruptSavepointError, match=what) as raised:
        row_key_groups(pa.array([K0, cell]), 128, "op/accState")
    assert raised.value.state == "op/accState"


def test_the_import_checks_and_the_writer_places_sql_keys_as_flink(savepoints, tmp_path):
    """The import compares every SQL key's key group with its hash (and passes); the writer
    puts SQL keys given without key groups where Flink would, and refuses a malformed one."""
    import_flink(savepoints["2.3.0-hashmap"], tmp_path / "imported", ttl_default=TTL_DEFAULT)
    source = Savepoint.open(tmp_path / "imported")
    op = next(o for o in source.operators if "processedCountState" in o.keyed_state_names)
    assert op.writer_assigned_key_groups
    flink = op.keyed_state("processedCountState").to_arrow()
    keys = flink.column("key").to_pylist() + [K0[:12] + b"k" + bytes(6) + b"\x81"]  # a new key 'k', inline
    with SavepointWriter(tmp_path / "written") as writer:
        new = writer.add_operator(op.operator_id, 2, max_parallelism=op.max_parallelism,
                                  key_serializer=op.key_serializer, key_groups="writer")
        counts = new.keyed_state("processedCountState", op.keyed_state("processedCountState").value_serializer)
        counts.add(keys, list(range(len(keys))))
        with pytest.raises(InvalidArgumentError, match="bytes 0..3 give a row of 16 bytes, but 12 follow"):
            counts.add([K0[:-4]], [1])
    written = Savepoint.open(tmp_path / "written").operator(op.operator_id).keyed_state("processedCountState").to_arrow()
    placed = dict(zip(written.column("key").to_pylist(), written.column("key_group").to_pylist()))
    assert {k: placed[k] for k in flink.column("key").to_pylist()} == dict(
        zip(flink.column("key").to_pylist(), flink.column("key_group").to_pylist()))
    assert placed[keys[-1]] == murmur_hash(reference_hash(keys[-1][4:])) % op.max_parallelism
    assert np.unique(list(placed.values())).size > 1
