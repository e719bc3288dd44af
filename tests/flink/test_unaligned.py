"""Retained checkpoints of unaligned checkpoints with in-flight data (tests/flink/data/checkpoints
``*-hashmap-unaligned-backpressure``: a source feeding a keyed counter that sleeps per record, so
the checkpoint keeps the buffers between them): Flink 2.3.0's merged channel state handles
(``_metadata`` v6), and 2.0.2's (v5) and 1.20.3's (v4) one handle per channel, each subtask's
buffers in one file the task manager shares.

They inspect (the in-flight data per operator) and verify (a warning), their operator and keyed
state read as the job's truth; import refuses them by operator and bytes unless told to drop the
in-flight data, and then the report says what it dropped and the state round-trips to Flink.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import struct

import pytest

from pyref.cli import main as cli
from pyref.errors import CorruptSavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint, export_savepoint, import_flink
from pyref.flink.channel_state import INPUT, OUTPUT, read_channel_state
from pyref.flink.datainput import DataInput
from pyref.flink.import_plan import plan_import
from pyref.flink.inspection import describe_flink, verify_flink
from pyref.flink.metadata import parse_metadata

from tests.flink.test_checkpoints import DATA, truth
from tests.flink.test_corpus import assert_reads_as_truth

#: Case -> (_metadata version, merged handles).
CASES = {"2.3.0-hashmap-unaligned-backpressure": (6, True), "2.0.2-hashmap-unaligned-backpressure": (5, False),
         "1.20.3-hashmap-unaligned-backpressure": (4, False)}
UIDS = ["events", "events-filter", "slow-counter"]


def checkpoint(case: str) -> pathlib.Path:
    return DATA / case / "checkpoint"


@pytest.mark.parametrize("case", sorted(CASES))
def test_channel_state_handles_are_read_in_their_release_s_form(case: str) -> None:
    version, merged = CASES[case]
    with FlinkSavepoint.open(checkpoint(case), uids=UIDS) as sp:
        assert sp.version == version
        handles = {op.name: [h for s in op.state.subtasks for h in s.in_flight] for op in sp.operators}
    # The source's records wait in its chained filter's result subpartitions and the counter's input channels.
    assert handles["events"] == []
    assert {h.direction for h in handles["events-filter"]} == {OUTPUT}
    assert {h.direction for h in handles["slow-counter"]} == {INPUT}
    every = handles["events-filter"] + handles["slow-counter"]
    assert {h.merged for h in every} == {merged}
    # Every channel of the two-way exchange, (partition, subpartition) or (gate, channel) 0 and 1.
    assert {c for h in handles["events-filter"] for c in h.channels} == {(0, 0), (0, 1)}
    # One file of the checkpoint directory holds every subtask's buffers; each handle its share of it.
    files = {h.stream.location for h in every if h.stream is not None}
    assert len(files) == 1
    size = os.path.getsize(checkpoint(case) / files.pop())
    assert sum(h.size for h in every) <= size
    assert all(h.stream is not None and h.stream.size == size for h in every)


@pytest.mark.parametrize("case", sorted(CASES))
def test_records_were_in_flight_at_the_checkpoint(case: str) -> None:
    """The truth agrees: the source had emitted more than the counter had counted."""
    operators = truth(case)["operators"]
    emitted = sum(split["position"] for subtask in operators["events"]["operator_state"]["SourceReaderState"]["decoded"]
                  for split in subtask)
    counted = sum(e["value"] for e in operators["slow-counter"]["keyed_state"]["count"]["entries"])
    assert 0 < counted < emitted


@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_and_keyed_state_read_as_the_truth(case: str) -> None:
    assert_reads_as_truth(checkpoint(case), truth(case))


@pytest.mark.parametrize("case", sorted(CASES))
def test_inspect_shows_the_in_flight_data_and_verify_warns(case: str, capsys) -> None:
    with FlinkSavepoint.open(checkpoint(case), uids=UIDS) as sp:
        info = {op["name"]: op for op in describe_flink(sp)["operators"]}
        report = verify_flink(sp)
        subtask_bytes = {op.name: sum(h.size for s in op.state.subtasks for h in s.in_flight) for op in sp.operators}
    assert info["events"]["in_flight"] is None
    assert info["events-filter"]["in_flight"]["output_bytes"] == subtask_bytes["events-filter"] > 0
    assert info["slow-counter"]["in_flight"]["input_bytes"] == subtask_bytes["slow-counter"] > 0
    assert info["slow-counter"]["in_flight"]["files"] == 1
    assert report.ok and report.values > 0
    assert any("in-flight data" in w and "slow-counter" in w for w in report.warnings)
    assert cli(["inspect", str(checkpoint(case)), "--uid", "slow-counter", "--uid", "events-filter"]) == 0
    out = capsys.readouterr().out
    counter_bytes = info["slow-counter"]["in_flight"]["input_bytes"]
    assert f"in-flight data (unaligned checkpoint): {counter_bytes} bytes in" in out
    assert "import-flink would refuse" in out


def test_verify_finds_a_missing_in_flight_file(tmp_path: pathlib.Path) -> None:
    source = checkpoint("1.20.3-hashmap-unaligned-backpressure")
    shutil.copytree(source, tmp_path / "checkpoint")
    with FlinkSavepoint.open(source) as sp:
        names = {h.stream.location for op in sp.operators for s in op.state.subtasks for h in s.in_flight
                 if h.stream is not None}
    (tmp_path / "checkpoint" / names.pop()).unlink()
    with FlinkSavepoint.open(tmp_path / "checkpoint") as sp:
        assert describe_flink(sp)["operators"][2]["in_flight"]["input_bytes"] == 2550  # inspect opens no buffer
        report = verify_flink(sp)
    assert not report.ok and any("in-flight data" in e and "does not exist" in e for e in report.errors)


def test_a_restore_plan_reads_the_keyed_state_as_any_checkpoint_s() -> None:
    with FlinkSavepoint.open(checkpoint("2.3.0-hashmap-unaligned-backpressure"), uids=UIDS) as sp:
        plan = {op.operator_id: op for op in sp.restore_plan(3).summary().operators}
    assert sum(s.planned_bytes for s in plan["slow-counter"].subtasks) > 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_import_refuses_the_in_flight_data_by_operator_and_bytes(case: str, tmp_path: pathlib.Path, capsys) -> None:
    with FlinkSavepoint.open(checkpoint(case), uids=UIDS) as sp:
        lost = sp.operator("slow-counter").in_flight
        with pytest.raises(UnsupportedFormatError) as refused:
            plan_import(sp)  # the Spark import's driver plans the same way
    assert lost is not None
    reason = refused.value.reason
    assert f"slow-counter (85a8382f15be92fc24347a7bf1206c53): {lost['input_bytes']} bytes of input channels" in reason
    assert "events-filter" in reason and "savepoint" in reason and "--drop-in-flight-data" in reason
    with pytest.raises(UnsupportedFormatError, match="in-flight data"):
        import_flink(checkpoint(case), tmp_path / "imported", uids=UIDS)
    assert not (tmp_path / "imported").exists() or not any((tmp_path / "imported").iterdir())
    # spark-import-flink refuses it before Spark starts.
    assert cli(["spark-import-flink", str(checkpoint(case)), str(tmp_path / "spark"), *[f"--uid={u}" for u in UIDS],
                "--json"]) == UnsupportedFormatError.exit_code
    assert "--drop-in-flight-data" in json.loads(capsys.readouterr().out)["error"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_import_dropping_the_in_flight_data_says_so_and_keeps_the_state(case: str, tmp_path: pathlib.Path,
                                                                        capsys) -> None:
    expected = truth(case)
    report = import_flink(checkpoint(case), tmp_path / "imported", uids=UIDS, drop_in_flight_data=True).to_dict()
    dropped = {op["operator_id"]: op["in_flight_data_dropped"] for op in report["operators"]}
    assert dropped["events"] is None
    assert dropped["events-filter"]["output_bytes"] > 0 and dropped["slow-counter"]["input_bytes"] > 0
    export_savepoint(tmp_path / "imported", tmp_path / "flink", flink_version=expected["flink_version"])
    with FlinkSavepoint.open(tmp_path / "flink") as exported:
        assert all(op.in_flight is None for op in exported.operators)  # a savepoint: aligned
        expected["checkpoint_id"] = exported.checkpoint_id
    assert_reads_as_truth(tmp_path / "flink", expected)
    assert cli(["import-flink", str(checkpoint(case)), str(tmp_path / "cli"), "--drop-in-flight-data",
                *[f"--uid={uid}" for uid in UIDS], "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [op["in_flight_data_dropped"] for op in printed["operators"]] == list(dropped.values())


# -- hostile bytes: the parser's bounds, on handles built by hand --------------------------------


def _unmerged(kind: int | None, offsets: int = 1, size: int = 100) -> bytes:
    head = b"" if kind is None else bytes([kind])
    return (head + struct.pack(">iiii", 0, 0, 1, offsets) + struct.pack(f">{offsets}q", *range(offsets))
            + struct.pack(">q", size) + b"\x00")


def _read(data: bytes, direction: str, version: int):
    return read_channel_state(DataInput(data, path="_metadata"), direction, version)


def test_a_handle_of_the_other_direction_or_an_unknown_type_is_corrupt() -> None:
    assert _read(struct.pack(">i", 1) + _unmerged(1), INPUT, 6)[0].channels == ((0, 1),)
    assert _read(struct.pack(">i", 1) + _unmerged(None), OUTPUT, 4)[0].size == 100
    for kind in (2, 4, 0, 9):  # an output form among input channels, or no form at all
        with pytest.raises(CorruptSavepointError, match="input channel state handle type") as error:
            _read(struct.pack(">i", 1) + _unmerged(kind), INPUT, 6)
        assert error.value.byte_range == (4, 5)


def test_counts_beyond_the_bytes_are_refused_before_anything_is_allocated() -> None:
    with pytest.raises(CorruptSavepointError, match="state count 2147483647 is impossible"):
        _read(struct.pack(">i", 2**31 - 1) + _unmerged(None), INPUT, 4)
    with pytest.raises(CorruptSavepointError, match="offset count 268435456 is impossible"):
        _read(struct.pack(">i", 1) + _unmerged(None)[:12] + struct.pack(">i", 1 << 28) + bytes(16), INPUT, 4)
    with pytest.raises(CorruptSavepointError, match="negative state size"):
        _read(struct.pack(">i", 1) + _unmerged(None, size=-1), INPUT, 4)


def test_a_merged_handle_s_channel_offsets_must_fill_their_length() -> None:
    channel = struct.pack(">iiqi", 0, 1, 10, 1) + struct.pack(">q", 0)
    offsets = struct.pack(">i", 1) + channel
    merged = bytes([3]) + struct.pack(">iq", 0, 10) + b"\x00"
    ok = _read(struct.pack(">i", 1) + merged + struct.pack(">i", len(offsets)) + offsets, INPUT, 6)
    assert ok[0].merged and ok[0].channels == ((0, 1),) and ok[0].size == 10
    padded = offsets + b"\x00\x00"
    with pytest.raises(CorruptSavepointError, match="2 trailing bytes after the channel offsets") as error:
        _read(struct.pack(">i", 1) + merged + struct.pack(">i", len(padded)) + padded, INPUT, 6)
    start = 4 + len(merged) + 4 + len(offsets)
    assert error.value.byte_range == (start, start + 2)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_truncation_of_the_metadata_is_a_typed_error(case: str) -> None:
    data = (checkpoint(case) / "_metadata").read_bytes()
    properties = len(parse_metadata(data).properties)  # Java-serialized, kept as bytes: not parsed
    for end in range(0, len(data) - properties, 7):
        with pytest.raises((CorruptSavepointError, UnsupportedFormatError)):
            parse_metadata(data[:end], path="_metadata")
