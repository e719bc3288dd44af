"""A FLIP-27 source's positions (pyref.flink.sources): the corpus's real NumberSequenceSource
and custom-source bytes, Kafka savepoints built from the connector's vectors, damage as typed
errors naming operator, state, element and bytes, round trips, ``pyref inspect`` and
``pyref set-source-position``."""

from __future__ import annotations

import json
import random
import pathlib
import struct

import pytest

from compat_tests.flink.sources.test_source_vectors import VECTORS
from pyref import DistributionMode, Savepoint, SavepointWriter
from pyref.cli import main
from pyref.errors import CorruptSavepointError, InvalidArgumentError, SavepointError
from pyref.flink import FlinkSavepoint, import_flink
from pyref.flink.sources import (
    MIGRATED_OFFSET,
    NO_STOPPING_OFFSET,
    READER_STATE,
    EnumeratorSplit,
    EnumeratorState,
    KafkaSplit,
    NumberSequenceSplit,
    OpaqueSplit,
    decode_coordinator_state,
    decode_split,
    encode_coordinator_state,
    encode_split,
    kafka_offsets,
    rewrite_source_splits,
    sequence_starts,
    source_splits,
)
from pyref.serializers import Bytes, Int64

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "compat_tests/flink/corpus"
OPERATOR_STATE_CASES = sorted(p.parent for p in CORPUS.glob("*/*/operator-state/truth.json"))
KAFKA_SPLITS = {v["name"]: bytes.fromhex(v["bytes"]) for v in VECTORS["splits"] if v["source"] == "kafka"}
KAFKA_V3 = next(bytes.fromhex(v["coordinator_state"]) for v in VECTORS["enumerators"]
                if v["name"] == "version 3: splits and statuses")
ORDERS_0, ORDERS_1, CLICKS_7, CLICKS_8, WIDE = KAFKA_SPLITS.values()


def envelope(version: int, payload: bytes) -> bytes:
    return struct.pack(">ii", version, len(payload)) + payload


def source_savepoint(path: pathlib.Path, readers: list[list[bytes]], coordinator: bytes | None,
                     operator: str = "src") -> pathlib.Path:
    """A pyref savepoint whose operator ``operator`` holds the reader elements and coordinator state
    given, beside a list state and an operator that are no source (they must come through edits)."""
    with SavepointWriter(path) as w:
        op = w.add_operator(operator, parallelism=len(readers))
        state = op.list_state(READER_STATE, Bytes(), DistributionMode.SPLIT_DISTRIBUTE)
        for subtask, elements in enumerate(readers):
            if elements:
                state.add(subtask, elements)
        op.list_state("other", Int64()).add(0, [1, 2, 3])
        op.coordinator_state = coordinator
        w.add_operator("sink", parallelism=1).list_state("seen", Int64()).add(0, [42])
    return path


def splits_of(path: pathlib.Path, operator: str = "src", source: str | None = None):
    return source_splits(Savepoint.open(path).operator(operator), source)


# -- the corpus: real Flink bytes ----------------------------------------------------------------


@pytest.mark.parametrize("case", OPERATOR_STATE_CASES, ids=lambda c: "/".join(c.parts[-3:-1]))
def test_corpus_sources_read_as_their_truth(case):
    truth = json.loads((case / "truth.json").read_text(encoding="utf-8"))
    with FlinkSavepoint.open(case / "savepoint") as sp:
        by_id = {op.operator_id: op for op in sp.operators}
        for uid, recorded in truth["operators"].items():
            state = recorded["operator_state"].get(READER_STATE)
            if state is None:
                continue
            splits = source_splits(by_id[recorded["operator_id"]])
            stored = [[bytes.fromhex(e) for e in elements] for elements in state["subtasks"]]
            if recorded["coordinator"]["source"].endswith("NumberSequenceSource"):
                assert splits.source == "number-sequence" and splits.note is None
                assert [list(r) for r in splits.readers] == [
                    [NumberSequenceSplit(d["split_id"], d["from"], d["to"]) for d in decoded]
                    for decoded in state["decoded"]]
                assert splits.enumerator == EnumeratorState(1, ())  # remaining_splits: []
                assert [[encode_split(s) for s in r] for r in splits.readers] == stored
            else:  # the corpus's own FixedSource: no known serializer, kept as it is, said why
                assert splits.source is None and "split serializer" in splits.note
                assert [[encode_split(s) for s in r] for r in splits.readers] == stored
                assert splits.enumerator.data == bytes.fromhex(recorded["coordinator"]["enumerator_checkpoint"])


def test_imported_savepoint_holds_what_flink_wrote(tmp_path):
    case = CORPUS / "2.3.0" / "hashmap" / "operator-state" / "savepoint"
    import_flink(str(case), str(tmp_path / "imported"))
    imported = Savepoint.open(tmp_path / "imported")
    with FlinkSavepoint.open(case) as sp:
        for op in sp.operators:
            assert source_splits(imported.operator(op.name)) == source_splits(op)
    assert source_splits(imported.operator("list-states")) is None  # no source state at all


# -- Kafka, from the connector's vectors ------------------------------------------------------------


def test_kafka_readers_and_enumerator_are_recognised(tmp_path):
    path = source_savepoint(tmp_path / "sp", [[ORDERS_0, ORDERS_1], [], [WIDE]], KAFKA_V3)
    splits = splits_of(path)
    assert splits.source == "kafka" and splits.note is None
    assert splits.readers == ((KafkaSplit("orders", 0, 42), KafkaSplit("orders", 1, 1000, 2000)), (),
                              (KafkaSplit("tópico-😀", 2**31 - 1, 2**63 - 2),))
    assert splits.enumerator.assigned == [KafkaSplit("orders", 0, 42), KafkaSplit("clicks", 8, -3, -1)]
    assert splits.enumerator.pending == [KafkaSplit("clicks", 7, -2)]
    assert splits.enumerator.initial_discovery_finished is True
    listed = splits.to_dict()
    assert listed["readers"][0][0] == {"kind": "kafka", "split_id": "orders-0", "topic": "orders", "partition": 0,
                                       "starting_offset": 42, "stopping_offset": NO_STOPPING_OFFSET}
    assert [s["split_id"] for s in listed["enumerator"]["pending"]] == ["clicks-7"]


def test_enumerator_alone_is_recognised(tmp_path):
    """Readers that hold no split yet: the enumerator's checkpoint says which source it is."""
    path = source_savepoint(tmp_path / "sp", [[], []], KAFKA_V3)
    assert splits_of(path).source == "kafka"


def test_unknown_enumerator_version_stays_opaque_with_a_note(tmp_path):
    checkpoint = b"\x00\x00\x00\x00future"
    path = source_savepoint(tmp_path / "sp", [[ORDERS_0]], struct.pack(">iii", 1, 9, len(checkpoint)) + checkpoint)
    splits = splits_of(path)
    assert splits.enumerator == EnumeratorState(9, data=checkpoint)
    assert "enumerator serializer version 9 not decoded" in splits.note


def test_unknown_source_stays_opaque_with_a_note(tmp_path):
    element = envelope(3, b"\x01\x02\x03")
    path = source_savepoint(tmp_path / "sp", [[element]], None)
    splits = splits_of(path)
    assert splits.source is None and splits.readers == ((OpaqueSplit(3, b"\x01\x02\x03"),),)
    assert "needs their source's split serializer" in splits.note
    assert encode_split(splits.readers[0][0]) == element


def test_other_coordinators_state_is_no_source(tmp_path):
    """A coordinator that is not a SourceCoordinator (framing version 7), without reader state: no source."""
    with SavepointWriter(tmp_path / "sp") as w:
        w.add_operator("committer", parallelism=1).coordinator_state = struct.pack(">ii", 7, 0)
    assert splits_of(tmp_path / "sp", "committer") is None


# -- damage -------------------------------------------------------------------------------------------


def test_split_length_beyond_the_element_names_it(tmp_path):
    path = source_savepoint(tmp_path / "sp", [[ORDERS_0], [struct.pack(">ii", 0, 100) + b"x" * 10]], None)
    with pytest.raises(CorruptSavepointError, match=r"split length 100 is impossible with 10 bytes left") as exc:
        splits_of(path)
    assert exc.value.state == "src/SourceReaderState subtask 1 element 0"
    assert exc.value.byte_range == (4, 8)


def test_truncated_split_of_a_recognised_source_is_damage(tmp_path):
    """Subtask 0's split says Kafka; subtask 1's, three bytes short, must then read as Kafka too."""
    path = source_savepoint(tmp_path / "sp", [[ORDERS_0], [ORDERS_1, envelope(0, ORDERS_1[8:-3])]], None)
    with pytest.raises(CorruptSavepointError, match="truncated: stopping offset needs 8 bytes, 5 remain") as exc:
        splits_of(path)
    assert exc.value.state == "src/SourceReaderState subtask 1 element 1"
    assert exc.value.byte_range == (28, 36)  # 8 of envelope, 20 of topic, partition and offset


def test_split_of_another_version_among_a_sources_splits_is_damage(tmp_path):
    path = source_savepoint(tmp_path / "sp", [[ORDERS_0, envelope(7, ORDERS_0[8:])]], None)
    with pytest.raises(CorruptSavepointError, match="split serializer version 7: KafkaSource") as exc:
        splits_of(path)
    assert exc.value.state == "src/SourceReaderState subtask 0 element 1"


def test_bytes_not_of_the_named_source_are_damage(tmp_path):
    path = source_savepoint(tmp_path / "sp", [[ORDERS_0]], None)
    with pytest.raises(CorruptSavepointError, match="split serializer version 0: NumberSequenceSource"):
        splits_of(path, source="number-sequence")
    with pytest.raises(InvalidArgumentError, match=r"no such sources: \['pulsar'\]; the sources are number-sequence, kafka, file"):
        splits_of(path, source="pulsar")


@pytest.mark.parametrize("damage, message, where", [
    (lambda b: b[:12] + struct.pack(">i", 10**6) + b[16:], "partitions 1000000 is impossible", (12, 16)),
    (lambda b: b[:8] + struct.pack(">i", len(b) - 13) + b[12:-1],
     "truncated: initial discovery finished needs 1 bytes, 0 remain", None),
    (lambda b: b + b"\x00", "1 bytes after the enumerator checkpoint", None),
    (lambda b: b[:8] + struct.pack(">i", len(b)) + b[12:], "enumerator checkpoint length", (8, 12)),
    (lambda b: b[:52] + struct.pack(">i", 5) + b[56:], "assignment status 5", (52, 56)),
], ids=["count", "truncated", "trailing", "length", "status"])
def test_damaged_enumerator_checkpoint_names_the_coordinator_state(tmp_path, damage, message, where):
    path = source_savepoint(tmp_path / "sp", [[ORDERS_0]], damage(KAFKA_V3))
    with pytest.raises(CorruptSavepointError, match=message) as exc:
        splits_of(path)
    assert exc.value.state == "src (coordinator state)"
    if where is not None:
        assert exc.value.byte_range == where


def test_file_checkpoint_with_a_wrong_magic_number_is_damage():
    vector = next(v for v in VECTORS["enumerators"] if v["source"] == "file" and v["splits"])
    stored = bytearray(bytes.fromhex(vector["coordinator_state"]))
    stored[12] ^= 0xFF
    with pytest.raises(CorruptSavepointError, match="magic number 0xdeadbe10, not 0xdeadbeef"):
        decode_coordinator_state(bytes(stored), "file")


def test_damaged_bytes_show_in_inspect_without_failing_it(tmp_path, capsys):
    path = source_savepoint(tmp_path / "sp", [[ORDERS_0, envelope(0, b"\x00")]], None)
    assert main(["inspect", str(path), "--json"]) == 0
    (op,) = [o for o in json.loads(capsys.readouterr().out)["operators"] if o["operator_id"] == "src"]
    assert "src/SourceReaderState subtask 0 element 1" in op["source"]["error"]


# -- round trips ------------------------------------------------------------------------------------


@pytest.mark.parametrize("split", [
    KafkaSplit("", 0, 0), KafkaSplit("nul\x00in-topic", -1, MIGRATED_OFFSET), KafkaSplit("𝄞" * 100, 3, 9, 10),
    NumberSequenceSplit("", -(2**63), 2**63 - 1), NumberSequenceSplit("\x00😀", 5, 4),
], ids=repr)
def test_split_encodes_and_decodes_back(split):
    assert decode_split(encode_split(split), split.kind) == split


def test_kafka_enumerator_of_every_version_encodes_and_decodes_back():
    splits = (EnumeratorSplit(KafkaSplit("a", 0, MIGRATED_OFFSET), "assigned"),
              EnumeratorSplit(KafkaSplit("b", 1, MIGRATED_OFFSET), "pending"))
    for state in (EnumeratorState(0, tuple(EnumeratorSplit(s.split, "assigned", i) for i, s in enumerate(splits)),
                                  subtasks=(0, 1, 2)),
                  EnumeratorState(1, tuple(EnumeratorSplit(s.split, "assigned") for s in splits)),
                  EnumeratorState(2, splits, initial_discovery_finished=True),
                  EnumeratorState(3, splits, initial_discovery_finished=False)):
        assert decode_coordinator_state(encode_coordinator_state("kafka", state), "kafka") == state


# -- editing --------------------------------------------------------------------------------------------


def test_rewrite_moves_kafka_offsets_in_readers_and_enumerator(tmp_path):
    source = source_savepoint(tmp_path / "sp", [[ORDERS_0, ORDERS_1], [CLICKS_7]], KAFKA_V3)
    written = rewrite_source_splits(source, tmp_path / "moved", "src",
                                    kafka_offsets({("orders", 0): 7, ("clicks", 7): 99}))
    assert written.location == Savepoint.open(tmp_path / "moved").location
    splits = splits_of(tmp_path / "moved")
    assert splits.readers == ((KafkaSplit("orders", 0, 7), KafkaSplit("orders", 1, 1000, 2000)),
                              (KafkaSplit("clicks", 7, 99),))
    assert splits.enumerator.assigned == [KafkaSplit("orders", 0, 7), KafkaSplit("clicks", 8, -3, -1)]
    assert splits.enumerator.pending == [KafkaSplit("clicks", 7, 99)]
    moved = Savepoint.open(tmp_path / "moved")
    assert list(moved.operator("src").list_state("other").partition(0)) == [1, 2, 3]
    assert list(moved.operator("sink").list_state("seen").partition(0)) == [42]
    assert list(Savepoint.open(source).operator("src").list_state(READER_STATE).partition(0)) == [ORDERS_0, ORDERS_1]


def test_rewrite_keeps_an_enumerator_it_cannot_read(tmp_path):
    checkpoint = b"opaque"
    coordinator = struct.pack(">iii", 1, 9, len(checkpoint)) + checkpoint
    source = source_savepoint(tmp_path / "sp", [[ORDERS_0]], coordinator)
    rewrite_source_splits(source, tmp_path / "moved", "src", kafka_offsets({("orders", 0): 1}), copy=True)
    assert Savepoint.open(tmp_path / "moved").operator("src").coordinator_state == coordinator
    assert splits_of(tmp_path / "moved").readers == ((KafkaSplit("orders", 0, 1),),)


def test_rewrite_refuses_what_it_cannot_do(tmp_path):
    source = source_savepoint(tmp_path / "sp", [[envelope(3, b"?")]], None)
    with pytest.raises(InvalidArgumentError, match="holds no splits of a known source"):
        rewrite_source_splits(source, tmp_path / "a", "src", sequence_starts({"1": 2}))
    with pytest.raises(InvalidArgumentError, match=r"no such operators: \['nope'\]"):
        rewrite_source_splits(source, tmp_path / "b", "nope", sequence_starts({"1": 2}))
    kafka = source_savepoint(tmp_path / "kafka", [[ORDERS_0]], None)
    with pytest.raises(InvalidArgumentError, match="turned a KafkaSplit into a NumberSequenceSplit"):
        rewrite_source_splits(kafka, tmp_path / "c", "src", lambda split: NumberSequenceSplit("1", 0, 1))
    assert not (tmp_path / "a").exists() and not (tmp_path / "c" / "_manifest").exists()


def test_cli_sets_kafka_offsets_and_refuses_unknown_splits(tmp_path, capsys):
    source = source_savepoint(tmp_path / "sp", [[ORDERS_0], [WIDE]], KAFKA_V3)
    assert main(["set-source-position", str(source), str(tmp_path / "moved"), "src", "--kafka-offset",
                 "tópico-😀:2147483647=-2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] == str(tmp_path / "moved")
    assert splits_of(tmp_path / "moved").readers[1] == (KafkaSplit("tópico-😀", 2**31 - 1, -2),)
    assert main(["inspect", str(tmp_path / "moved")]) == 0
    assert "reader 1: tópico-😀/2147483647 offset -2" in capsys.readouterr().out
    for bad, message in ((["--kafka-offset", "orders:5=1"], "holds no split orders:5 (its splits: clicks:7"),
                         (["--kafka-offset", "orders=1"], "--kafka-offset takes TOPIC:PARTITION=OFFSET"),
                         ([], "give the positions to set")):
        assert main(["set-source-position", str(source), str(tmp_path / "x"), "src", *bad, "--json"]) == 2
        assert message in json.loads(capsys.readouterr().out)["error"]
    assert not (tmp_path / "x").exists()


def test_inspect_of_a_flink_savepoint_shows_the_sequence_split(capsys):
    case = CORPUS / "2.3.0" / "rocksdb" / "operator-state" / "savepoint"
    truth = json.loads((case.parent / "truth.json").read_text(encoding="utf-8"))
    (recorded,), = truth["operators"]["sequence-source"]["operator_state"][READER_STATE]["decoded"]
    assert main(["inspect", str(case), "--json"]) == 0
    ops = {op["name"]: op for op in json.loads(capsys.readouterr().out)["operators"]}
    assert ops["sequence-source"]["source"]["readers"] == [[{"kind": "number-sequence", "split_id": "1",
                                                             "start": recorded["from"], "end": recorded["to"]}]]
    assert ops["list-states"]["source"] is None
    assert main(["inspect", str(case)]) == 0
    assert f"reader 0: [1] {recorded['from']}..{recorded['to']}" in capsys.readouterr().out


# -- hostile bytes ---------------------------------------------------------------------------------------


def _mutations(data: bytes, rng: random.Random, count: int):
    """Byte flips, truncations, insertions and 32-bit lengths set to extremes at random places."""
    for _ in range(count):
        out = bytearray(data)
        what = rng.randrange(4)
        at = rng.randrange(len(out) + 1)
        if what == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif what == 1:
            del out[at:]
        elif what == 2:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        else:
            out[at:at + 4] = struct.pack(">i", rng.choice([-1, 2**31 - 1, 2**20, len(out) + 1]))
        yield bytes(out)


def test_mutated_source_bytes_give_typed_errors_only():
    """Every vector mutated 300 times: each decode returns a value or raises a typed error, and
    what decodes encodes back to bytes that decode to the same value."""
    rng = random.Random(27)
    decoded = 0
    for vector in VECTORS["splits"]:
        for data in _mutations(bytes.fromhex(vector["bytes"]), rng, 300):
            try:
                split = decode_split(data)
            except SavepointError:
                continue
            decoded += 1
            assert decode_split(encode_split(split)) == split
    for vector in VECTORS["enumerators"]:
        for data in _mutations(bytes.fromhex(vector["coordinator_state"]), rng, 300):
            try:
                state = decode_coordinator_state(data, vector["source"])
            except SavepointError:
                continue
            decoded += 1
            assert decode_coordinator_state(encode_coordinator_state(vector["source"], state), vector["source"]) == state
    assert decoded > 0  # some mutations leave valid bytes (a flipped offset bit): those round-trip


def test_file_source_readers_and_enumerator_in_inspect(tmp_path, capsys):
    files = {v["name"]: bytes.fromhex(v["bytes"]) for v in VECTORS["splits"] if v["source"] == "file"}
    checkpoint = next(bytes.fromhex(v["coordinator_state"]) for v in VECTORS["enumerators"]
                      if v["source"] == "file" and v["splits"])
    path = source_savepoint(tmp_path / "sp", [[files["0000000002"]], []], checkpoint)
    assert splits_of(path).source == "file"
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("reader 0: [0000000002] hdfs://reader@namenode:8020/logs/2026/äpfel.txt?v=2#frag bytes 1024+2048, "
            "at 1500 +7 records") in out
    assert "reader 1: no splits" in out
    assert ("enumerator (version 1): pending [0000000001] file:/data/in/part-0.csv bytes 0+4096, "
            "[0000000003] s3://bucket/x.json bytes 0+100, at -1 +3 records; processed paths 2") in out


# -- a real FileSource savepoint ------------------------------------------------------------------------

FILE_SOURCE = pathlib.Path(__file__).resolve().parent / "data" / "filesource-2.3.0" / "savepoint"
FILE_SOURCE_LINES = 1633  # the lines the job had read when it was stopped (its README)


def test_real_file_source_savepoint_reads_where_its_readers_were(tmp_path):
    with FlinkSavepoint.open(FILE_SOURCE) as sp:
        op = sp.operator("file-source")
        splits = source_splits(op)
        stored = [list(op.list_state(READER_STATE).partition(i)) for i in range(2)]
    assert splits.source == "file" and splits.note is None
    inputs = {f"/tmp/pyref-filesource/in/part-{x}.txt" for x in "abc"}
    held = splits.splits()
    assert [s.reader_position[0] for s in held] == [-1, -1]  # a stream format: records counted, no offset
    assert sum(s.reader_position[1] for s in held) == FILE_SOURCE_LINES
    assert all(s.path.scheme == "file" and s.path.path in inputs and (s.offset, s.length, s.file_size)
               == (0, 260000, 260000) for s in held)
    (pending,) = splits.enumerator.pending
    assert {s.path.path for s in [*held, pending]} == inputs and pending.reader_position is None
    assert sorted(splits.enumerator.processed_paths) == sorted(f"file:{p}" for p in inputs)
    assert [[encode_split(s) for s in reader] for reader in splits.readers] == stored
    with FlinkSavepoint.open(FILE_SOURCE) as sp:
        coordinator = sp.operator("file-source").coordinator_state
    assert encode_coordinator_state("file", splits.enumerator) == coordinator
    import_flink(str(FILE_SOURCE), str(tmp_path / "imported"))
    assert source_splits(Savepoint.open(tmp_path / "imported").operator("file-source")) == splits


def test_kafka_assignment_of_many_readers_reads_in_linear_work():
    """A version-0 enumerator checkpoint naming 250,000 readers (2 MB) was checked for a subtask
    named twice against a list: quadratic, minutes of work for a hostile coordinator state."""
    readers = 250_000
    body = struct.pack(">ii", readers, 0) + b"".join(struct.pack(">ii", subtask, 0) for subtask in range(readers))
    state = decode_coordinator_state(struct.pack(">iii", 1, 0, len(body)) + body, "kafka")
    assert state.subtasks == tuple(range(readers)) and state.splits == ()
    twice = struct.pack(">ii", 1001, 0) + body[8:8 + 8 * 1000] + struct.pack(">ii", 999, 0)
    with pytest.raises(CorruptSavepointError, match="subtask 999 has two assignments"):
        decode_coordinator_state(struct.pack(">iii", 1, 0, len(twice)) + twice, "kafka")


@pytest.mark.parametrize("flag, value, java", [("--kafka-offset", "orders:0=9223372036854775808", "long"),
                                               ("--kafka-offset", "orders:0=-9999999999999999999", "long")])
def test_cli_refuses_a_position_beyond_a_java_long(tmp_path, capsys, flag, value, java):
    """A position of 19 digits beyond a long's range ended in struct.error (an internal error, exit 1)."""
    source = source_savepoint(tmp_path / "sp", [[ORDERS_0]], KAFKA_V3)
    assert main(["set-source-position", str(source), str(tmp_path / "moved"), "src", flag, value, "--json"]) == 2
    assert f"does not fit a Java {java}" in json.loads(capsys.readouterr().out)["error"]
    assert not (tmp_path / "moved" / "_manifest").exists()
    sequence = source_savepoint(tmp_path / "seq", [[encode_split(NumberSequenceSplit("0", 1, 5))]], None)
    with pytest.raises(InvalidArgumentError, match="does not fit a Java long"):
        rewrite_source_splits(sequence, tmp_path / "s", "src", sequence_starts({"0": 2**63}))
    with pytest.raises(InvalidArgumentError, match="does not fit a Java int"):
        rewrite_source_splits(source, tmp_path / "k", "src",
                              lambda split: KafkaSplit(split.topic, 2**31, split.starting_offset))


@pytest.mark.parametrize("version", [1, 2])
def test_rewrite_refuses_a_position_an_enumerator_of_topics_and_partitions_cannot_store(tmp_path, version):
    """KafkaSource's enumerator versions 1 and 2 store topic and partition only: setting the offset
    of a partition only the enumerator holds wrote the savepoint without it (exit 0, offset dropped)."""
    pending = KafkaSplit("clicks", 3, MIGRATED_OFFSET)
    enumerator = EnumeratorState(version, (EnumeratorSplit(KafkaSplit("orders", 0, MIGRATED_OFFSET), "assigned"),
                                           EnumeratorSplit(pending, "assigned" if version == 1 else "pending")),
                                 initial_discovery_finished=True if version == 2 else None)
    source = source_savepoint(tmp_path / "sp", [[ORDERS_0]], encode_coordinator_state("kafka", enumerator))
    with pytest.raises(InvalidArgumentError, match="position of clicks:3, which no reader holds, cannot be set"):
        rewrite_source_splits(source, tmp_path / "a", "src", kafka_offsets({("clicks", 3): 5}))
    assert not (tmp_path / "a" / "_manifest").exists()
    # A partition a reader holds: the reader's split carries the position, the enumerator's stays.
    rewrite_source_splits(source, tmp_path / "b", "src", kafka_offsets({("orders", 0): 5}))
    moved = splits_of(tmp_path / "b")
    assert moved.readers == ((KafkaSplit("orders", 0, 5),),) and moved.enumerator == enumerator


def test_kafka_assignment_of_many_readers_writes_in_linear_work():
    """Writing a version-0 enumerator checkpoint (what a rewrite of its positions does) scanned every
    split once per reader: 100,000 readers and 40,000 splits (2 MB) took over a minute."""
    splits = tuple(EnumeratorSplit(KafkaSplit("t", i, 5), "assigned", 2 * i) for i in range(40_000))
    state = EnumeratorState(0, splits, subtasks=tuple(range(100_000)))
    assert decode_coordinator_state(encode_coordinator_state("kafka", state), "kafka") == state
