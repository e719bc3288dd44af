"""Write the golden savepoints of the current format version.

    python -m compat_tests.generate_goldens              # all missing cases
    python -m compat_tests.generate_goldens --list       # the cases and what they exercise
    python -m compat_tests.generate_goldens --out DIR    # elsewhere (tests of the generator)

Each case becomes ``golden/<major>.<minor>/<case>/`` holding ``savepoint/`` (and,
for derived savepoints, the savepoints it refers to as siblings), the
``expected.json`` canonical dump and ``generated.json`` (how it was made).
``expected.json`` is computed from the values written, not read back; the
generator then checks that pyref reads exactly that, and stops otherwise.

Goldens are written once. An existing case directory is never overwritten or
changed: the generator refuses. New files are added to ``golden/SHA256SUMS``,
which ``test_golden_integrity.py`` checks.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import shutil
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from compat_tests import GOLDEN_DIR
from compat_tests._build import (
    add_to_sums,
    command_line,
    corpus_files,
    fresh_dir,
    provenance,
    remove_lock,
    rescale_model,
    rewrite_manifest,
    write_model,
)
from compat_tests.canonical import (
    KeyedModel,
    ListModel,
    OperatorModel,
    canonical_text,
    dump_savepoint,
    expected_from_model,
    first_difference,
)

SPLIT, UNION, BROADCAST = 1, 2, 3
DEFAULT_PARALLELISMS = (1, 2, 3, 4)


@dataclass
class Case:
    name: str
    exercises: str
    #: Writes ``<case dir>/savepoint`` (and siblings); returns the model of ``savepoint``.
    build: Callable[[pathlib.Path], list[OperatorModel]]
    parallelisms: tuple[int, ...] = DEFAULT_PARALLELISMS
    writer_options: dict = field(default_factory=dict)
    #: The format version the case's savepoint is labelled with: its golden set.
    format_version: str = "1.0"


def _s():
    from pyref import serializers

    return serializers


# --------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------


def _f64(hex_bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(hex_bits))[0]


FLOATS = [0.0, -0.0, 1.5, -2.25, 1e-300, 5e-324, 1.7976931348623157e308, math.inf, -math.inf,
          _f64("7ff8000000000000"), _f64("fff8000000000000"), _f64("7ff8000000000123"), 0.1]
INT32S = [0, 1, -1, 2**31 - 1, -(2**31), 123456]
INT64S = [0, 1, -1, 2**63 - 1, -(2**63), 2**53 + 1, -(2**31) - 1]
STRINGS = ["", "a", "héllo", "日本語", "🚀 rocket", "nul\x00inside", "tab\tnew\nline", "x" * 1500, "𝄞 clef"]
BYTES = [b"", b"\x00", b"\xff\xfe", bytes(range(256)), b"plain"]
JSONS = [{"a": 1, "b": [True, None, 2.5]}, [], "text", 12345678901234567890, -0.5, {"ünï": {"cödé": []}},
         None, False, {"z": 1, "a": 2}]


def cart_serializer():
    """A protobuf message type built at run time (no generated code), importing a well-known type."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    fdp = descriptor_pb2.FileDescriptorProto(name="compat/cart.proto", package="compat", syntax="proto3",
                                             dependency=["google/protobuf/timestamp.proto"])
    status = fdp.enum_type.add(name="Status")
    for i, n in enumerate(["STATUS_UNSPECIFIED", "OPEN", "PAID"]):
        status.value.add(name=n, number=i)
    F = descriptor_pb2.FieldDescriptorProto
    item = fdp.message_type.add(name="Item")
    item.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    item.field.add(name="quantity", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    cart = fdp.message_type.add(name="Cart")
    cart.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    cart.field.add(name="items", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".compat.Item")
    cart.field.add(name="total_cents", number=3, type=F.TYPE_SINT64, label=F.LABEL_OPTIONAL)
    cart.field.add(name="created", number=4, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                   type_name=".google.protobuf.Timestamp")
    cart.field.add(name="status", number=5, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL, type_name=".compat.Status")
    cart.field.add(name="weight", number=6, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(fdp)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("compat.Cart"))
    return _s().Protobuf(cls), cls


def carts():
    _, Cart = cart_serializer()
    out = [Cart()]
    c = Cart(id="cart-1", total_cents=-1999, status=1, weight=2.5)
    c.items.add(sku="apple", quantity=3)
    c.items.add(sku="päar", quantity=-1)
    c.created.seconds = 1_700_000_000
    c.created.nanos = 5
    out.append(c)
    out.append(Cart(id="日本", total_cents=2**62, status=2))
    return out


# --------------------------------------------------------------------------
# Case builders
# --------------------------------------------------------------------------


def single(name: str, *operators_fn, parallelisms=DEFAULT_PARALLELISMS, exercises: str = "",
           format_version: str = "1.0", **writer_options) -> Case:
    """A case that writes one savepoint from the model ``operators_fn()`` returns."""

    def build(case_dir: pathlib.Path) -> list[OperatorModel]:
        model = [op for fn in operators_fn for op in fn()]
        write_model(case_dir / "savepoint", model, **writer_options)
        return model

    return Case(name, exercises, build, tuple(parallelisms), writer_options, format_version)


def keys_of(n: int, fmt: str = "key-{}") -> list[str]:
    return [fmt.format(i) for i in range(n)]


def serializer_case(sid: str, serializer_fn, values_fn) -> Case:
    """One built-in serializer as list element, keyed value, keyed list element and map value."""

    def ops():
        s = _s()
        ser = serializer_fn()
        values = values_fn()
        half = (len(values) + 1) // 2
        lists = [ListModel("elements", SPLIT, ser, [values[:half], values[half:]])]
        keyed = [
            KeyedModel("value", "value", ser, [(i, v) for i, v in enumerate(values)]),
            KeyedModel("list", "list", ser, [(100, values), (101, []), (102, values[:1])]),
            KeyedModel("map", "map", ser, [(7, f"u{i}", v) for i, v in enumerate(values)],
                       user_key_serializer=s.String()),
        ]
        return [OperatorModel(f"op-{sid}", 2, 128, s.Int64(), lists, keyed)]

    return single(f"serializer-{sid}", ops,
                  exercises=f"built-in serializer `{sid}` as list element, keyed value, keyed list element and map "
                            f"value")


def key_case(sid: str, key_fn, keys_fn) -> Case:
    def ops():
        s = _s()
        keys = keys_fn()
        keyed = [KeyedModel("count", "value", s.Int64(), [(k, i) for i, k in enumerate(keys)])]
        return [OperatorModel(f"keys-{sid}", 3, 64, key_fn(), [], keyed)]

    return single(f"keys-{sid}", ops, exercises=f"`{sid}` keys: key hashing, key groups and their canonical order")


def list_mode_ops():
    s = _s()
    return [OperatorModel("source", 3, 128, None, [
        ListModel("offsets", SPLIT, s.Int64(), [[0, 1, 2, 2**63 - 1], [], [-(2**63), -1, 7]]),
    ])]


def union_ops():
    s = _s()
    return [OperatorModel("union-op", 3, 128, None, [
        ListModel("watermarks", UNION, s.String(), [["a", "b"], ["c"], []]),
    ])]


def broadcast_ops():
    s = _s()
    return [OperatorModel("broadcast-op", 2, 128, None, [
        ListModel("rules", BROADCAST, s.Int32(), [[1, 2, 3], [1, 2, 3]]),
    ])]


def multi_split_ops():
    s = _s()
    return [OperatorModel("multi", 3, 128, None, [
        ListModel("b", SPLIT, s.Int32(), [[1, 2], [3], [4, 5, 6, 7]]),
        ListModel("a", SPLIT, s.Int32(), [[10], [], [11, 12]]),
        ListModel("ä", SPLIT, s.Int32(), [[20, 21, 22], [23], [24]]),
        ListModel("Z", SPLIT, s.Int32(), [[], [], [30]]),
        ListModel("u", UNION, s.Int32(), [[40], [41, 42], []]),
        ListModel("bc", BROADCAST, s.Int32(), [[50], [51], [52, 53]]),
    ])]


def keyed_value_ops():
    s = _s()
    return [OperatorModel("counter", 2, 128, s.String(), [], [
        KeyedModel("count", "value", s.Int64(), [(k, i * 1000) for i, k in enumerate(keys_of(40, "/page/{}"))]),
    ])]


def keyed_list_ops():
    s = _s()
    rows = [(k, [f"e{k}-{j}" for j in range(k % 5)]) for k in range(30)]
    return [OperatorModel("buffer", 2, 128, s.Int64(), [], [KeyedModel("events", "list", s.String(), rows)])]


def keyed_map_ops():
    s = _s()
    rows = [(k, f"field-{j}", k * 0.5 + j) for k in range(12) for j in range(k % 4)]
    return [OperatorModel("mapper", 2, 128, s.Int32(), [], [
        KeyedModel("fields", "map", s.Float64(), rows, user_key_serializer=s.String()),
    ])]


def pipeline_ops():
    """Several operators of a pipeline: every state kind and mode, different parallelisms."""
    s = _s()
    urls = keys_of(60, "/page/{}")
    return [
        OperatorModel("kafka-source", 2, 128, None, [
            ListModel("offsets", SPLIT, s.Int64(), [[100, 101], [200, 201]]),
            ListModel("watermark", UNION, s.Int64(), [[5], [6]]),
        ], name="Kafka source"),
        OperatorModel("url-counter", 3, 256, s.String(), [], [
            KeyedModel("count", "value", s.Int64(), [(u, i) for i, u in enumerate(urls)]),
            KeyedModel("recent", "list", s.Int32(), [(u, list(range(i % 3))) for i, u in enumerate(urls[:20])]),
            KeyedModel("by-hour", "map", s.Int64(), [(u, h, h * i) for i, u in enumerate(urls[:10]) for h in (1, 2)],
                       user_key_serializer=s.Int32()),
        ], name="URL counter"),
        OperatorModel("rules", 1, 1, None, [
            ListModel("rules", BROADCAST, s.String(), [["deny /admin", "allow *"]]),
        ]),
        OperatorModel("stateless-map", 4, 4096, None, []),
        OperatorModel("sink", 4, 4096, s.Int32(), [
            ListModel("pending", SPLIT, s.Bytes(), [[b"t1"], [], [b"t2", b"t3"], []]),
        ], [KeyedModel("acks", "value", s.Boolean(), [(i, i % 2 == 0) for i in range(25)])]),
    ]


def compressible_ops():
    s = _s()
    rows = [(f"user-{i:04d}", [f"event {j} of user {i:04d} " * 3 for j in range(i % 7)]) for i in range(300)]
    return [
        OperatorModel("sessions", 3, 128, s.String(), [
            ListModel("log", SPLIT, s.String(), [[f"line {i} " * 10 for i in range(n)] for n in (150, 0, 90)]),
        ], [KeyedModel("events", "list", s.String(), rows)]),
    ]


def empty_states_ops():
    s = _s()
    return [
        OperatorModel("empty", 3, 128, s.String(), [
            ListModel("split", SPLIT, s.Int64(), [[], [], []]),
            ListModel("union", UNION, s.Int64(), [[], [], []]),
            ListModel("broadcast", BROADCAST, s.Int64(), [[], [], []]),
        ], [
            KeyedModel("value", "value", s.Int64(), []),
            KeyedModel("list", "list", s.Int64(), []),
            KeyedModel("map", "map", s.Int64(), [], user_key_serializer=s.String()),
        ]),
        OperatorModel("no-state", 2, 128, None, []),
    ]


def empty_subtasks_ops():
    s = _s()
    return [OperatorModel("sparse", 4, 128, s.String(), [
        ListModel("offsets", SPLIT, s.Int64(), [[], [7], [], []]),
        ListModel("union", UNION, s.Int64(), [[], [], [3, 4], []]),
    ], [KeyedModel("count", "value", s.Int64(), [("only-key", 1), ("another", 2)])])]


def non_ascii_ops():
    s = _s()
    keys = ["ключ", "clé", "鍵", "🔑", "𝄞", "a\u0301", "á", "Ω", "ß", "\u00e9t\u00e9", "emoji 👩‍💻"]
    return [OperatorModel("оператор-演算子-🚀", 2, 128, s.String(), [
        ListModel("состояние", SPLIT, s.String(), [["α", "β"], ["γ"]]),
    ], [
        KeyedModel("état", "value", s.String(), [(k, k[::-1]) for k in keys]),
        KeyedModel("地図", "map", s.String(), [(k, f"ü{j}", f"{k}/{j}") for k in keys[:4] for j in range(2)],
                   user_key_serializer=s.String()),
    ])]


def max_parallelism_ops(max_parallelism: int, parallelism: int, n_keys: int):
    def ops():
        s = _s()
        partitions = [[i * 10 + j for j in range(i + 1)] for i in range(parallelism)]
        return [OperatorModel(f"maxp-{max_parallelism}", parallelism, max_parallelism, s.Int64(), [
            ListModel("offsets", SPLIT, s.Int64(), partitions),
        ], [KeyedModel("count", "value", s.Int32(), [(k * 7919, k) for k in range(n_keys)])])]

    return ops


def small_ops():
    s = _s()
    return [OperatorModel("tiny", 2, 128, s.Int32(), [
        ListModel("offsets", SPLIT, s.Int64(), [[1], [2]]),
    ], [KeyedModel("flag", "value", s.Boolean(), [(1, True), (2, False), (3, True)])])]


def mixed_size_ops():
    s = _s()
    big = [(i, "payload " * 200 + str(i)) for i in range(20)]
    small = [(100 + i, "s") for i in range(3)]
    return [OperatorModel("mixed", 2, 32, s.Int32(), [
        ListModel("small", SPLIT, s.Int32(), [[1], [2]]),
        ListModel("big", SPLIT, s.Bytes(), [[bytes([i]) * 3000 for i in range(4)], [b"z" * 5000]]),
    ], [KeyedModel("docs", "value", s.String(), big + small)])]


def many_chunks_ops():
    s = _s()
    rows = [(k % 5, f"u{k}", f"value-{k:05d}-" + "v" * 40) for k in range(400)]
    return [OperatorModel("chunked", 2, 8, s.Int32(), [
        ListModel("log", SPLIT, s.String(), [[f"entry {i:04d} " + "e" * 30 for i in range(120)], ["last"]]),
    ], [KeyedModel("m", "map", s.String(), rows, user_key_serializer=s.String())])]


def pipeline_source_ops():
    """The source savepoint of the derived cases."""
    s = _s()
    return [
        OperatorModel("source", 2, 128, None, [
            ListModel("offsets", SPLIT, s.Int64(), [[1, 2, 3], [4, 5]]),
            ListModel("epoch", UNION, s.Int32(), [[9], [10]]),
            ListModel("config", BROADCAST, s.String(), [["c"], ["c"]]),
        ]),
        OperatorModel("counter", 2, 128, s.String(), [], [
            KeyedModel("count", "value", s.Int32(), [(k, i) for i, k in enumerate(keys_of(30))]),
            KeyedModel("seen", "list", s.Int64(), [(k, [i, i + 1]) for i, k in enumerate(keys_of(10))]),
        ]),
    ]


def derived_case(name: str, exercises: str, steps: list[tuple[str, int, bool]], migrate: bool = False) -> Case:
    """Write ``base`` from :func:`pipeline_source_ops`, then each step (directory, parallelism, copy)
    rescales the previous savepoint; the last step's directory is renamed ``savepoint``."""

    def build(case_dir: pathlib.Path) -> list[OperatorModel]:
        from pyref import migrate_state, rescale

        model = pipeline_source_ops()
        options = {"inline_bytes": 0}
        write_model(case_dir / "base", model, **options)
        previous = "base"
        for directory, parallelism, copy in steps:
            rescale(str(case_dir / previous), str(case_dir / directory), parallelism, copy=copy)
            remove_lock(case_dir / directory)
            model = rescale_model(model, parallelism)
            previous = directory
        if migrate:
            s = _s()
            migrate_state(str(case_dir / previous), str(case_dir / "savepoint"), "counter", "count", s.Int64())
            remove_lock(case_dir / "savepoint")
            counter = next(op for op in model if op.operator_id == "counter")
            count = next(k for k in counter.keyed if k.name == "count")
            count.value_serializer = s.Int64()
        return model

    return Case(name, exercises, build, writer_options={"inline_bytes": 0})


def tuple_v1_case() -> Case:
    """Tuple serializer snapshots of version 1 (no field_names), as an older writer stored them."""

    def ops():
        s = _s()
        key = s.Tuple(s.String(), s.Int32())
        value = s.Tuple(s.Int64(), s.Nullable(s.String()))
        element = s.ListOf(s.Tuple(s.Boolean(), s.Bytes()))
        rows = [(("k", i), (i * 3, None if i % 2 else f"v{i}")) for i in range(15)]
        return [OperatorModel("legacy", 2, 128, key, [
            ListModel("pairs", SPLIT, element, [[[(True, b"\x01")], []], [[(False, b""), (True, b"xy")]]],
                      snapshot=_v1(element.snapshot())),
        ], [KeyedModel("state", "value", value, rows, value_snapshot=_v1(value.snapshot()))],
            key_snapshot=_v1(key.snapshot()))]

    def build(case_dir: pathlib.Path) -> list[OperatorModel]:
        model = ops()
        path = case_dir / "savepoint"
        write_model(path, model)

        def downgrade(manifest):
            op = manifest.operators[0]
            _downgrade(op.key_serializer)
            _downgrade(op.list_states[0].element_serializer)
            _downgrade(op.keyed_states[0].value_serializer)

        rewrite_manifest(path, downgrade)
        return model

    return Case("tuple-snapshot-v1", "serializer snapshots of an older version: `tuple` version 1 (no "
                "field_names) as key serializer, keyed value serializer and nested in a list element serializer; "
                "fields read as f0, f1, ...", build)


def _v1(snapshot):
    _downgrade(snapshot)
    return snapshot


def _downgrade(snapshot) -> None:
    """Turn every tuple snapshot in the tree into version 1 (spec/serializers.md §3.8)."""
    if snapshot.serializer_id == "tuple":
        snapshot.version = 1
        del snapshot.field_names[:]
    for child in snapshot.nested:
        _downgrade(child)


def cases() -> list[Case]:
    s = _s()
    out = [
        single("list-split-distribute", list_mode_ops, parallelisms=(1, 2, 3, 4, 5),
               exercises="list state, SPLIT_DISTRIBUTE: uneven and empty partitions, extreme int64 values"),
        single("list-union", union_ops, exercises="list state, UNION: every subtask restores every element"),
        single("list-broadcast", broadcast_ops, exercises="list state, BROADCAST: subtask i restores old subtask i mod p"),
        single("list-multiple-split-states", multi_split_ops, parallelisms=(1, 2, 3, 4, 5, 7),
               exercises="several SPLIT_DISTRIBUTE states in one operator (start rotation, UTF-8 name order) "
                         "beside UNION and BROADCAST"),
        single("keyed-value", keyed_value_ops, exercises="keyed value state, string keys"),
        single("keyed-list", keyed_list_ops, exercises="keyed list state incl. empty lists, int64 keys"),
        single("keyed-map", keyed_map_ops, exercises="keyed map state, int32 keys, string user keys, float64 values"),
        single("multi-operator-pipeline", pipeline_ops, parallelisms=(1, 2, 3, 4, 8),
               exercises="five operators: every state kind and mode, a stateless operator, different parallelisms "
                         "and max parallelisms (1, 128, 256, 4096)"),
    ]
    out += [
        serializer_case("int32", s.Int32, lambda: INT32S),
        serializer_case("int64", s.Int64, lambda: INT64S),
        serializer_case("float64", s.Float64, lambda: FLOATS),
        serializer_case("boolean", s.Boolean, lambda: [True, False, False]),
        serializer_case("string", s.String, lambda: STRINGS),
        serializer_case("bytes", s.Bytes, lambda: BYTES),
        serializer_case("nullable", lambda: s.Nullable(s.Int64()), lambda: [None, 0, None, -5, 2**40]),
        serializer_case("tuple", lambda: s.Tuple(s.String(), s.Int32(), s.Nullable(s.Float64()),
                                                 names=("name", "count", "score")),
                        lambda: [("a", 1, 0.5), ("", -1, None), ("ü", 2**31 - 1, -0.0)]),
        serializer_case("list", lambda: s.ListOf(s.ListOf(s.String())),
                        lambda: [[], [[]], [["a", "b"], ["c"]], [["ü"] * 3]]),
        serializer_case("map", lambda: s.MapOf(s.String(), s.ListOf(s.Int64())),
                        lambda: [{}, {"z": [1], "a": [], "m": [2, 3]}, {"ключ": [2**63 - 1]}]),
        serializer_case("protobuf", lambda: cart_serializer()[0], carts),
        serializer_case("json", s.Json, lambda: JSONS),
        key_case("int32", s.Int32, lambda: INT32S + list(range(2, 30))),
        key_case("int64", s.Int64, lambda: INT64S + list(range(2, 30))),
        key_case("string", s.String, lambda: STRINGS + keys_of(20)),
        key_case("boolean", s.Boolean, lambda: [True, False]),
        key_case("bytes", s.Bytes, lambda: BYTES + [bytes([i]) for i in range(128, 150)]),
        key_case("tuple", lambda: s.Tuple(s.String(), s.Int32(), names=("user", "shard")),
                 lambda: [(u, i) for u in ("alice", "bob", "") for i in (0, -1, 7)]),
        key_case("nested-tuple", lambda: s.Tuple(s.Tuple(s.Int64(), s.Boolean()), s.Bytes()),
                 lambda: [((i, i % 2 == 0), bytes([i])) for i in range(12)]),
        single("compression-none", compressible_ops, codec="none", inline_bytes=0, chunk_bytes=2048,
               file_bytes=8192, exercises="uncompressed chunks (codec NONE) in several data files, several chunks "
                                          "per key group and per partition"),
        single("compression-zstd", compressible_ops, codec="zstd", inline_bytes=0, chunk_bytes=2048,
               file_bytes=8192, exercises="zstd-compressed chunks in several data files"),
        single("empty-states", empty_states_ops, exercises="list states with no elements in every mode, keyed "
                                                           "states of every kind with no entries, an operator "
                                                           "without state"),
        single("empty-subtasks", empty_subtasks_ops, parallelisms=(1, 2, 4, 8),
               exercises="most subtasks restore nothing: two keys, one element"),
        single("non-ascii-names-and-keys", non_ascii_ops,
               exercises="non-ASCII operator id, state names, keys and user keys (incl. non-BMP and combining "
                         "characters)"),
        single("max-parallelism-1", max_parallelism_ops(1, 1, 10), parallelisms=(1, 2),
               exercises="max parallelism 1: one key group; parallelism 2 is omitted from the dump"),
        single("max-parallelism-128", max_parallelism_ops(128, 3, 200), exercises="max parallelism 128"),
        single("max-parallelism-32768", max_parallelism_ops(32768, 2, 300), parallelisms=(1, 2, 3, 4, 16),
               exercises="max parallelism 32768 (the upper bound)"),
        single("parallelism-equals-max-parallelism", max_parallelism_ops(8, 8, 40), parallelisms=(1, 2, 3, 4, 8),
               exercises="parallelism = max parallelism = 8: one key group per subtask"),
        single("inline-small-state", small_ops, exercises="every chunk inline in the manifest; no data files"),
        single("mixed-inline-and-file-chunks", mixed_size_ops, inline_bytes=512, codec="none",
               exercises="small chunks inline, large ones in a data file, in one state"),
        single("many-chunks", many_chunks_ops, inline_bytes=0, chunk_bytes=1024,
               exercises="a key group and a partition spread over many chunks (element ranges across chunks)"),
        tuple_v1_case(),
        derived_case("shallow-rescale", "a shallow (rescaled) savepoint referring to its base (sibling `base/`): "
                     "external-bases, re-cut list partitions, shared data files", [("savepoint", 3, False)]),
        derived_case("shallow-rescale-chain", "a shallow savepoint of a shallow savepoint: two bases (`base/`, "
                     "`mid/`), flattened", [("mid", 3, False), ("savepoint", 1, False)]),
        derived_case("rescale-copy", "a rescaled self-contained copy (no bases)", [("savepoint", 4, True)]),
        derived_case("migrated-state", "a serializer migration (int32 -> int64) written as a shallow savepoint: "
                     "new chunks of its own beside chunks of its base", [("mid", 2, True)], migrate=True),
    ]
    # Format 1.1: the optional feature "chunk-key-bounds" (spec/format.md §7.6).
    out += [
        single("key-bounds-sorted", keyed_value_ops, many_chunks_ops, format_version="1.1", sort_keys=True,
               inline_bytes=0, chunk_bytes=256,
               exercises="format 1.1: keyed chunks sorted by key, with key bounds; several chunks per key group "
                         "with disjoint bounds"),
        single("key-bounds-unsorted", keyed_list_ops, keyed_map_ops, format_version="1.1", key_bounds=True,
               inline_bytes=0, chunk_bytes=256,
               exercises="format 1.1: key bounds on chunks in write order (overlapping bounds), list and map state"),
        single("key-bounds-inline", keyed_value_ops, list_mode_ops, format_version="1.1", key_bounds=True,
               exercises="format 1.1: key bounds on inline chunks, beside list state (which never has bounds)"),
    ]
    names = [c.name for c in out]
    assert len(names) == len(set(names)), names
    return out


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def write_json(path: pathlib.Path, document) -> None:
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def generate_case(case: Case, target: pathlib.Path, command: str) -> None:
    """Build one case in a temporary directory, check it, and move it into place."""
    if target.exists():
        raise SystemExit(f"{target} exists: goldens are written once and never overwritten")
    tmp = fresh_dir(target)
    try:
        model = case.build(tmp)
        expected = expected_from_model(model, case.parallelisms, case.format_version)
        actual = dump_savepoint(tmp / "savepoint", case.parallelisms)
        if canonical_text(actual) != canonical_text(expected):
            raise SystemExit(f"{case.name}: pyref does not read what was written: "
                             f"{first_difference(expected, actual)}")
        write_json(tmp / "expected.json", expected)
        write_json(tmp / "generated.json", {"case": case.name, "exercises": case.exercises,
                                            "format_version": case.format_version,
                                            "parallelisms": list(case.parallelisms),
                                            "writer_options": case.writer_options, **provenance(command)})
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_readme(version_dir: pathlib.Path) -> None:
    """The table of the set's cases, rendered from their generated.json (not hashed: derived)."""
    rows, batches = [], {}
    for case_dir in sorted(p for p in version_dir.iterdir() if (p / "generated.json").exists()):
        info = json.loads((case_dir / "generated.json").read_text(encoding="utf-8"))
        key = (info["command"], info["pyref_version"], info["python"], json.dumps(info["dependencies"]),
               info["generated_on"])
        batch = batches.setdefault(key, len(batches) + 1)
        options = ", ".join(f"{k}={v}" for k, v in info["writer_options"].items()) or "defaults"
        rows.append(f"| `{info['case']}` | {info['exercises']} | {options} | "
                    f"{', '.join(map(str, info['parallelisms']))} | {batch} |")
    lines = [
        f"# Golden savepoints, format {version_dir.name}",
        "",
        "Written once by `compat_tests/generate_goldens.py` and never edited: every file except this README is",
        "listed in `../SHA256SUMS`. Each case holds `savepoint/` (what a reader is given; derived cases keep the",
        "savepoints it refers to beside it), `expected.json` (its canonical dump, schema in",
        "`compat_tests/README.md`, computed from the values written) and `generated.json` (how it was made).",
        "",
        "| case | exercises | writer options | parallelisms | batch |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "Batches (exact command, library and pinned dependency versions):",
        "",
    ]
    for (command, pyref_version, python, deps, day), n in batches.items():
        dep_text = ", ".join(f"{k}=={v}" for k, v in json.loads(deps).items())
        lines.append(f"{n}. `{command}` on {day}: pyref {pyref_version}, {python}, {dep_text}")
    (version_dir / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def generate(out: pathlib.Path, only: list[str] | None = None) -> list[str]:
    """Write every missing case (or only the named ones); returns the names written."""
    command = command_line()
    selected = [c for c in cases() if not only or c.name in only]
    if only and len(selected) != len(set(only)):
        raise SystemExit(f"unknown cases: {sorted(set(only) - {c.name for c in selected})}")
    made, new_files, touched = [], [], set()
    for case in selected:
        version_dir = out / case.format_version
        target = version_dir / case.name
        if target.exists():
            print(f"exists, kept: {target.relative_to(out)}")
            continue
        version_dir.mkdir(parents=True, exist_ok=True)
        generate_case(case, target, command)
        made.append(case.name)
        touched.add(version_dir)
        new_files += [f"{case.format_version}/{case.name}/{rel}" for rel in corpus_files(target)]
        print(f"wrote {target.relative_to(out)}")
    add_to_sums(out, new_files)
    for version_dir in sorted(touched):
        write_readme(version_dir)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=GOLDEN_DIR, help="corpus root (default: %(default)s)")
    parser.add_argument("--case", action="append", help="generate only this case (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    if args.list:
        for c in cases():
            print(f"{c.name}: {c.exercises}")
        return 0
    made = generate(args.out, args.case)
    print(f"{len(made)} golden cases written under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
