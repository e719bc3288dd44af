"""Make the committed seed corpus: ``python -m fuzz.seeds [--out fuzz/corpus]``.

Seeds are real savepoints written by pyref's writer (and a shallow rescale with a
base), cut into the input layouts of :mod:`fuzz.targets`. Deterministic apart from
savepoint ids and timestamps; rerun it when the format changes. The ``operations``
seeds are the sequences of :data:`fuzz.operations.SEEDS` (``--target operations``
writes only those). The ``flink`` seeds are real Flink savepoints of the compatibility
corpus (:data:`FLINK_CASES`, ``--target flink`` writes only those).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import os
import shutil
import tarfile
import tempfile

from pyref import SavepointWriter, rescale
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.flink import sources
from pyref.codecs import Codec, compress, decompress
from pyref.manifest import decode_manifest
from pyref.redistribution import DistributionMode
from pyref.serializers import (
    Boolean,
    Bytes,
    Char,
    Enum,
    Float32,
    Float64,
    GlobalWindow,
    Int8,
    Int16,
    Int32,
    Int64,
    Json,
    ListOf,
    MapOf,
    Nullable,
    Opaque,
    Protobuf,
    String,
    TimeWindow,
    Tuple,
    Window,
)
from pyref.ttl import TtlConfig

from .operations import SEEDS as OPERATION_SEEDS
from .operations import operations_input
from .targets import (
    CHUNK_SERIALIZERS,
    KEY_SERIALIZERS,
    chunk_input,
    flink_input,
    manifest_input,
    savepoint_input,
    serializer_input,
)

HERE = os.path.dirname(os.path.abspath(__file__))
FLINK_CORPUS = os.path.join(os.path.dirname(HERE), "compat_tests", "flink", "corpus")
FLINK_TEST_DATA = os.path.join(os.path.dirname(HERE), "tests", "flink", "data")
#: Small real Flink savepoints (``<version>/<backend>/<case>``): inline-only (seeds, types),
#: with separate state files (operator-state, keyed-kinds), snappy-compressed (windows).
FLINK_CASES = ("1.17.2/hashmap/seeds", "2.3.0/rocksdb/seeds", "1.17.2/rocksdb/operator-state",
               "2.3.0/hashmap/operator-state", "2.0.2/rocksdb/types", "1.17.2/hashmap/windows",
               "1.20.3/hashmap/keyed-kinds")
FLINK_CHECKPOINTS = os.path.join(FLINK_TEST_DATA, "checkpoints")
#: Retained checkpoints: HashMap backend ones (the heap layout, plain and compressed), a RocksDB one of 1.14
#: and ones of 1.16 and 2.3 (RocksDB's SST files inline in ``_metadata``: crc32c uncompressed, XXH3 with
#: zstd and with LZ4 data blocks), one of unaligned checkpoints (in-flight channel state handles), an
#: incremental RocksDB one with heap timers (raw keyed state), one right after a rescale (range
#: deletion blocks) and a ForSt one (partitioned indexes), tarred with their ``shared/`` files, which sit
#: beside ``sp`` as beside ``chk-N``; two of the changelog state backend (its changes in ``_metadata``; in
#: Snappy-compressed DSTL files); file-merging ones (FLIP-306: every stream a segment of a merged file one
#: directory below ``taskowned/`` or ``shared/``; operator state, heap keyed state and timers, RocksDB's SST files).
FLINK_CHECKPOINT_CASES = ("1.20.3-hashmap-seeds", "1.20.3-hashmap-seeds-compressed", "1.14.6-rocksdb-full-seeds",
                          "1.16.3-rocksdb-full-seeds", "2.3.0-rocksdb-full-seeds-zstd",
                          "2.3.0-rocksdb-full-seeds-lz4", "1.20.3-hashmap-unaligned-backpressure",
                          "2.3.0-rocksdb-incremental-windows-heap-timers",
                          "2.3.0-rocksdb-incremental-churn-rescaled-3", "2.3.0-forst-incremental-churn",
                          "1.20.3-hashmap-changelog-memory-heap-kinds",
                          "2.3.0-hashmap-changelog-churn-materialized-compressed",
                          "1.20.3-hashmap-file-merging-operator-state", "2.3.0-hashmap-file-merging-heap-kinds",
                          "2.3.0-rocksdb-incremental-file-merging-churn")
#: Flink SQL, CEP and Scala API savepoints of the tests (``_metadata`` only; ``.gz`` ones are unpacked):
#: their table-runtime snapshots hold Java serialization streams, their CEP state flink-cep's own, the
#: Scala job's flink-scala's snapshots (a collection's cbfCode), a FileSource's readers and enumerator, a legacy
#: FlinkKafkaConsumer's union state (Kryo KafkaTopicPartitions, a topic in each string form).
FLINK_TEST_SAVEPOINTS = ("sql/2.3.0-hashmap", "sql/1.20.3-rocksdb", "cep/2.3.0-hashmap", "cep/1.20.3-rocksdb",
                         "scala/1.14.6-rocksdb/savepoint", "filesource-2.3.0/savepoint", "kafka-consumer-1.20.3/savepoint")
#: Savepoint seeds per savepoint: as written; repaired (7); with shared ranges and rows
#: (15); with a sparse 64 GiB manifest (17); with sparse 8 GiB data files declared so (39).
SAVEPOINT_FLAGS = (0, 7, 15, 17, 39)


def _write_savepoints(root: str) -> dict[str, str]:
    """A few small savepoints covering every state kind and mode; name -> directory."""
    out = {}

    def path(name):
        out[name] = os.path.join(root, name)
        return out[name]

    # The conftest scenario, inline and in a data file.
    for name, inline in (("seeds-inline", 1024), ("seeds-file", 0)):
        with SavepointWriter(path(name), inline_bytes=inline) as w:
            src = w.add_operator("kafka-source", parallelism=2)
            offsets = src.list_state("offsets", Int64(), DistributionMode.SPLIT_DISTRIBUTE)
            offsets.add(0, [100, 101])
            offsets.add(1, [200, 201])
            counter = w.add_operator("url-counter", parallelism=2, key_serializer=String())
            counter.keyed_state("count", Int64()).add([f"/page/{i}" for i in range(50)], list(range(50)))
    # Every keyed kind, every list mode, composite serializers, zstd and raw chunks.
    with SavepointWriter(path("kinds"), inline_bytes=0, chunk_bytes=512, buffer_bytes=4096) as w:
        op = w.add_operator("op", parallelism=3, max_parallelism=16, key_serializer=Int64())
        op.keyed_state("v", Nullable(String())).add(list(range(40)), [None if i % 3 == 0 else "x" * i for i in range(40)])
        op.keyed_state("l", Tuple(Int32(), Float64(), names=("a", "b")), kind="list").add(
            [1, 2, 3], [[(1, 1.5)], [], [(2, -0.0), (3, 2.5)]])
        op.keyed_state("m", ListOf(Boolean()), kind="map", user_key_serializer=String()).add(
            [1, 1, 2], [[True], [], [False, True]], user_keys=["a", "b", "a"])
        for mode in DistributionMode:
            ls = op.list_state(f"list-{mode.name.lower()}", Json(), mode)
            for sub in range(3):
                ls.add(sub, [{"sub": sub, "i": i} for i in range(sub + 1)])
    # Format 1.1 key bounds (sorted keys, so bounds are disjoint), and composite keys.
    with SavepointWriter(path("composite"), inline_bytes=64, sort_keys=True) as w:
        op = w.add_operator("op", parallelism=1, key_serializer=Tuple(String(), Int32()))
        op.keyed_state("map", MapOf(String(), Bytes())).add([("a", 1), ("b", 2)], [{"k": b"\x00"}, {}])
        op.keyed_state("proto", Protobuf(pb.ElementRange)).add(
            [("a", 1)], [pb.ElementRange(chunk=1, first=2, count=3)])
    # Format 1.2: namespaces, TTL, timers, broadcast and coordinator state, writer-assigned key groups.
    with SavepointWriter(path("format-1-2"), inline_bytes=256, chunk_bytes=512) as w:
        op = w.add_operator("windows", parallelism=2, max_parallelism=16, key_serializer=String(), uid="w")
        keys = [f"k{i}" for i in range(30)]
        op.keyed_state("count", Int64(), namespace_serializer=TimeWindow(), ttl=TtlConfig(1000)).add(
            keys, list(range(30)), namespaces=[Window(i % 3, i % 3 + 1) for i in range(30)],
            ttl_timestamps=list(range(30)))
        op.keyed_state("seen", Enum(["A", "B"]), kind="list", ttl=TtlConfig(5)).add(keys[:3], [["A"], [], ["B", "A"]],
                                                                                    ttl_timestamps=[1, 2, [3, 4]])
        op.timer_service("t", "event_time", GlobalWindow()).add(keys, list(range(30)), [None] * 30)
        op.broadcast_state("b", Char(), Float32()).add_all(["x", "y"], [0.5, -1.0])
        op.coordinator_state = b"\x00\x01coordinator"
        pojo = w.add_operator("pojo", parallelism=2, max_parallelism=8, key_groups="writer",
                              key_serializer=Opaque("flink", "com.example.Pojo", b"\x01"))
        pojo.keyed_state("v", Int16(), kind="reducing").add([b"a", b"b"], [1, 2], key_groups=[1, 6])
    # A shallow rescale: the target refers to the source's files as a base.
    rescale(out["kinds"], path("rescaled"), 2)
    _write_sources(path("sources"))
    return out


def _write_sources(path: str) -> None:
    """FLIP-27 sources' positions (pyref.flink.sources): Kafka readers with enumerators of versions 3 and
    0, a FileSource's readers and pending-splits checkpoint, a number sequence's readers."""
    s = sources
    kafka = [s.KafkaSplit("orders", 0, 17), s.KafkaSplit("orders", 1, -2, 99), s.KafkaSplit("clicks-\u00e9", 7, -3)]
    file_split = s.FileSplit("0", s.FileUri("file", None, None, -1, "/in/a b.csv"), 0, 100, 1700000000000, 100,
                             ("h1",), (10, 2))
    pending_file = s.EnumeratorSplit(dataclasses.replace(file_split, split_id="1", reader_position=None))
    enumerators = {
        "kafka": s.EnumeratorState(3, (s.EnumeratorSplit(kafka[0], "assigned"), s.EnumeratorSplit(kafka[2])),
                                   initial_discovery_finished=True),
        "kafka-v0": s.EnumeratorState(0, tuple(s.EnumeratorSplit(split, "assigned", i)
                                               for i, split in enumerate(kafka[:2])), subtasks=(0, 1)),
        "file": s.EnumeratorState(1, (pending_file,), processed_paths=("/in/a b.csv",)),
    }
    readers = {"kafka": [kafka[:2], kafka[2:]], "kafka-v0": [kafka[:1], []], "file": [[file_split]],
               "sequence": [[s.NumberSequenceSplit("0", 5, 9)], [s.NumberSequenceSplit("1", 10, 19)]]}
    with SavepointWriter(path, inline_bytes=128) as w:
        for name, held in readers.items():
            op = w.add_operator(name, parallelism=len(held))
            state = op.list_state(s.READER_STATE, Bytes(), DistributionMode.SPLIT_DISTRIBUTE)
            for subtask, splits in enumerate(held):
                if splits:
                    state.add(subtask, [s.encode_split(split) for split in splits])
            if name in enumerators:
                op.coordinator_state = s.encode_coordinator_state(name.split("-")[0], enumerators[name])


def _files(root: str, name: str) -> dict[str, bytes]:
    files = {}
    for directory in sorted(os.listdir(root)):
        for dirpath, _, names in os.walk(os.path.join(root, directory)):
            for n in sorted(names):
                if n == ".lock":
                    continue
                full = os.path.join(dirpath, n)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                top = rel.split("/")[0]
                if top == name or top in _bases(root, name):
                    with open(full, "rb") as f:
                        files[("sp" if top == name else top) + rel[len(top):]] = f.read()
    return files


def _bases(root: str, name: str) -> set[str]:
    with open(os.path.join(root, name, "_manifest"), "rb") as f:
        m, _ = decode_manifest(f.read(), path=name)
    return {b.directory for b in m.bases}


def _snapshots() -> list[tuple[bytes, list[bytes]]]:
    cases = [
        (Int64(), [1, -(2**63)]), (Int32(), [7]), (Float64(), [1.5, float("inf")]), (Boolean(), [True, False]),
        (String(), ["", "héllo"]), (Bytes(), [b"\x00\xff"]), (Json(), [{"a": [1, 2.5, None]}, "x"]),
        (Nullable(Int64()), [None, 3]), (ListOf(String()), [["a", "bc"], []]),
        (MapOf(Int32(), ListOf(Int64())), [{1: [2, 3]}, {}]),
        (Tuple(Int64(), String(), Nullable(Bytes())), [(1, "a", None), (2, "", b"z")]),
        (Tuple(String(), names=("name",)), [("n",)]),
        (Protobuf(pb.ElementRange), [pb.ElementRange(chunk=1, count=2)]),
        (ListOf(ListOf(MapOf(String(), Nullable(Tuple(Int32(), Float64()))))), [[[{"k": (1, 2.0)}, {"n": None}]]]),
        # format 1.2
        (Tuple(Int8(), Int16(), Char(), Float32()), [(1, -2, "é", 1.5)]), (Enum(["A", "B"]), ["B", "A"]),
        (MapOf(TimeWindow(), GlobalWindow()), [{Window(0, 1): None}]),
        (Opaque("flink", "com.example.Pojo", b"\x00"), [b"\x01\x02"]),
    ]
    return [(s.snapshot().SerializeToString(deterministic=True), [s.encode(v) for v in values]) for s, values in cases]


def _index(serializers, snapshot) -> int:
    for i, s in enumerate(serializers):
        if s.snapshot() == snapshot:
            return i
    return 0


def _flink_seeds() -> list[bytes]:
    """Each case as Flink wrote it; one with sparse state files, one with a planted link
    out of the savepoint directory (flink_input flags 1 and 2); and retained checkpoints, a
    file-merging one with its merged files sparse too."""
    seeds = []
    directories = [os.path.join(FLINK_CORPUS, *case.split("/"), "savepoint") for case in FLINK_CASES]
    directories += [os.path.join(FLINK_CHECKPOINTS, case, "checkpoint") for case in FLINK_CHECKPOINT_CASES]
    for case, directory in zip(FLINK_CASES + FLINK_CHECKPOINT_CASES, directories):
        packed = os.path.join(os.path.dirname(directory), "checkpoint.tar.gz")
        if not os.path.isdir(directory) and os.path.isfile(packed):
            seeds.append(flink_input(_unpacked_checkpoint(packed)))
            if case == "2.3.0-rocksdb-incremental-file-merging-churn":  # its merged files sparse, of 1 GiB
                seeds.append(flink_input(_unpacked_checkpoint(packed), flags=1))
            continue
        files = {}
        for name in sorted(os.listdir(directory)):
            with open(os.path.join(directory, name), "rb") as f:
                data = f.read()
            if name == "_metadata.gz":
                name, data = "_metadata", gzip.decompress(data)
            files[f"sp/{name}"] = data
        seeds.append(flink_input(files))
        if case == "1.17.2/rocksdb/operator-state":
            seeds.append(flink_input(files, flags=1))
            seeds.append(flink_input({**files, "sp/state.link": b"../outside/state", "outside/state": b"secret"},
                                     flags=2))
    for case in FLINK_TEST_SAVEPOINTS:
        directory = os.path.join(FLINK_TEST_DATA, *case.split("/"))
        for name in sorted(os.listdir(directory)):
            with open(os.path.join(directory, name), "rb") as f:
                data = f.read()
            seeds.append(flink_input({"sp/_metadata": gzip.decompress(data) if name.endswith(".gz") else data}))
    return seeds


def _unpacked_checkpoint(path: str) -> dict[str, bytes]:
    """A committed ``checkpoint.tar.gz`` (``checkpoint/``, ``shared/``, ``taskowned/``; a file-merging
    checkpoint's merged files one directory below the last two) as fuzz input files."""
    files = {}
    with tarfile.open(path) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if member.isfile():
                top, _, name = member.name.partition("/")
                extracted = tar.extractfile(member)
                assert extracted is not None and name.count("/") <= (top != "checkpoint")
                files[f"{'sp' if top == 'checkpoint' else top}/{name}"] = extracted.read()
    return files


def build(out: str, only: str | None = None) -> dict[str, int]:
    seeds: dict[str, list[bytes]] = {}
    if only in (None, "operations"):
        seeds["operations"] = [operations_input(ops) for ops in OPERATION_SEEDS.values()]
    if only in (None, "flink"):
        seeds["flink"] = _flink_seeds()
    if only is None:
        seeds.update(_savepoint_seeds())
    counts = {}
    for target, inputs in seeds.items():
        directory = os.path.join(out, target)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        for data in inputs:
            with open(os.path.join(directory, hashlib.sha1(data).hexdigest()), "wb") as f:
                f.write(data)
        counts[target] = len(set(inputs))
    return counts


def _savepoint_seeds() -> dict[str, list[bytes]]:
    """Seeds of the targets that read savepoints, cut from real ones."""
    seeds: dict[str, list[bytes]] = {t: [] for t in ("manifest", "chunk", "serializer", "savepoint")}
    root = tempfile.mkdtemp(prefix="pyref-seeds-")
    try:
        savepoints = _write_savepoints(root)
        for name, directory in savepoints.items():
            with open(os.path.join(directory, "_manifest"), "rb") as f:
                envelope = f.read()
            seeds["manifest"] += [manifest_input(envelope, fix=False), manifest_input(envelope, fix=True)]
            files = _files(root, name)
            seeds["savepoint"] += [savepoint_input(files, flags=flags) for flags in SAVEPOINT_FLAGS]
            m, _ = decode_manifest(envelope, path=name)
            for op in m.operators:
                # The chunk target's shapes: list, and keyed value, map and list state without 1.2 columns.
                plain = [s for s in op.keyed_states if s.kind in (pb.VALUE, pb.MAP, pb.LIST)
                         and not s.HasField("namespace_serializer") and not s.HasField("ttl")]
                states = [(s, 0) for s in op.list_states] + [(s, {pb.VALUE: 1, pb.MAP: 2, pb.LIST: 3}[s.kind])
                                                             for s in plain]
                for state, shape in states[:4]:
                    chunk = state.chunks[0]
                    if chunk.WhichOneof("location") == "inline_data":
                        stored = chunk.inline_data
                    else:
                        f = m.data_files[chunk.range.file]
                        where = directory if f.base == 0 else os.path.join(root, m.bases[f.base - 1].directory)
                        with open(os.path.join(where, f.path), "rb") as fh:
                            fh.seek(chunk.range.offset)
                            stored = fh.read(chunk.range.length)
                    payload = decompress(chunk.codec, stored, chunk.raw_length)
                    zstd = compress(Codec.ZSTD, payload)
                    value = state.element_serializer if shape == 0 else state.value_serializer
                    picks = dict(serializer=_index(CHUNK_SERIALIZERS, value))
                    if shape:
                        picks.update(key=_index(KEY_SERIALIZERS, op.key_serializer),
                                     user_key=_index(KEY_SERIALIZERS, state.user_key_serializer))
                    for codec, data in ((0, payload), (1, zstd)):
                        seeds["chunk"].append(chunk_input(data, codec=codec, shape=shape, rows=chunk.row_count,
                                                          raw_length=len(payload), **picks))
        for snapshot, values in _snapshots():
            seeds["serializer"].append(serializer_input(snapshot, values))
        # A chunk of each serializer's own values.
        from pyref.chunk import encode_chunk

        for index, s in enumerate(CHUNK_SERIALIZERS):
            sample = {"int64": [1, 2], "string": ["a"], "bytes": [b"b"], "int32": [3], "float64": [0.5],
                      "boolean": [True], "json": [[1]], "list": [[1]] if index == 7 else [[True]] if index == 13 else [[("a", None)]],
                      "map": [{"a": 1}] if index == 8 else [{"a": b"b"}], "nullable": [None, "x"],
                      "tuple": [(1, "a")] if index == 10 else [(1, 0.5)],
                      "protobuf": [pb.ElementRange(chunk=3)]}[s.serializer_id]
            payload = encode_chunk([s.encode_array(sample)])
            seeds["chunk"].append(chunk_input(payload, codec=0, shape=0, rows=len(sample),
                                              raw_length=len(payload), serializer=index))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "corpus"))
    parser.add_argument("--target", choices=["operations", "flink"], help="write only this target's seeds")
    args = parser.parse_args()
    print(build(args.out, args.target))


if __name__ == "__main__":
    main()
