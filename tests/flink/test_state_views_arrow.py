"""Flink state views as decoded Arrow tables and pandas DataFrames (real corpus savepoints):
every column the value type decodes is Arrow values, the others stay Flink's bytes and say so
in their field metadata; ``raw=True`` gives the stored bytes."""

from __future__ import annotations

import pathlib

import pyarrow as pa
import pytest

from pyref.flink import FlinkSavepoint
from pyref.flink.state_views import FLINK_BYTES

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "compat_tests/flink/corpus"
KEYED = CORPUS / "2.3.0/rocksdb/keyed-kinds/savepoint"
WINDOWS = CORPUS / "2.3.0/hashmap/windows/savepoint"
OPERATOR_STATE = CORPUS / "2.3.0/hashmap/operator-state/savepoint"

pytestmark = pytest.mark.skipif(not KEYED.exists(), reason="no Flink corpus")


def flink_bytes(table: pa.Table) -> dict[str, str]:
    return {f.name: f.metadata[FLINK_BYTES].decode() for f in table.schema if f.metadata}


def test_keyed_value_list_map_and_ttl_states_decode():
    with FlinkSavepoint.open(KEYED) as sp:
        op = sp.operator("keyed-kinds")
        count = op.keyed_state("count")
        table = count.to_arrow()
        assert table.schema.names == ["subtask", "key_group", "key", "value"] and not flink_bytes(table)
        assert dict(zip(*(table.column(c).to_pylist() for c in ("key", "value")))) == dict(count.items())
        assert table.column("key_group").to_pylist() == count.to_arrow(raw=True).column("key_group").to_pylist()
        nums = op.keyed_state("ttl-nums")  # LIST under TTL: a timestamp per element
        table = nums.to_arrow()
        assert table.schema.names[2:] == ["key", "value", "ttl_timestamp"]
        assert table.column("value").type == pa.list_(pa.int64())
        assert [[(t, v) for v, t in zip(vs, ts)] for vs, ts in zip(
            table.column("value").to_pylist(), table.column("ttl_timestamp").to_pylist())] == [
            [tuple(e) for e in v] for _, v in nums.items(with_ttl=True)]
        tags = op.keyed_state("ttl-tags")  # MAP under TTL: a row per entry
        table = tags.to_arrow()
        assert table.schema.names[2:] == ["key", "user_key", "value", "ttl_timestamp"]
        assert list(zip(*(table.column(c).to_pylist() for c in ("key", "user_key", "value")))) == list(tags.items())
        blob = op.keyed_state("blob")  # Kryo: Flink's bytes, and the column says so
        table = blob.to_arrow()
        assert flink_bytes(table) == {"value": "kryo:org.pyref.flink.LegacyBlob"}
        assert table.column("value") == blob.to_arrow(raw=True).column("value")


def test_windows_timers_list_and_broadcast_state_decode():
    with FlinkSavepoint.open(WINDOWS) as sp:
        tumbling = sp.operator("tumbling-reduce")
        contents = tumbling.keyed_state("window-contents").to_arrow()
        assert contents.column("namespace").type == pa.struct([("start", pa.int64()), ("end", pa.int64())])
        assert contents.column("value").type == pa.struct([("f0", pa.string()), ("f1", pa.int64())])
        timers = tumbling.timers("window-timers", "event-time")
        table = timers.to_arrow()
        assert [(k, (w["start"], w["end"]), t) for k, w, t in zip(
            *(table.column(c).to_pylist() for c in ("key", "namespace", "timestamp")))] == [
            (k, tuple(w), t) for k, w, t in timers.items()]
        global_window = sp.operator("count-reduce").keyed_state("count").to_arrow()
        assert flink_bytes(global_window) == {"namespace": "global-window"}  # Arrow has no GlobalWindow
    with FlinkSavepoint.open(OPERATOR_STATE) as sp:
        op = sp.operator("list-states")
        names = op.list_state("names")
        assert names.to_arrow().column("element").to_pylist() == names.elements()
        assert flink_bytes(op.list_state("blobs").to_arrow()) == {"element": "kryo:org.pyref.flink.LegacyBlob"}
        rules = op.broadcast_state("op-broadcast")
        table = rules.to_arrow()
        assert table.column("key").type == pa.string() and table.column("value").type == pa.int64()
        assert dict(zip(table.column("key").to_pylist()[:len(rules.items())], table.column("value").to_pylist())) == \
            rules.to_dict()


def test_to_pandas_is_the_decoded_table():
    pytest.importorskip("pandas")  # optional: the quick tier runs without it
    with FlinkSavepoint.open(KEYED) as sp:
        history = sp.operator("keyed-kinds").keyed_state("history")
        frame = history.to_pandas()
        assert list(frame.columns) == ["subtask", "key_group", "key", "value"]
        assert {k: list(v) for k, v in zip(frame["key"], frame["value"])} == dict(history.items())
    with FlinkSavepoint.open(OPERATOR_STATE) as sp:
        rules = sp.operator("list-states").broadcast_state("op-broadcast")
        assert rules.to_pandas().shape == (rules.to_arrow().num_rows, 3)
