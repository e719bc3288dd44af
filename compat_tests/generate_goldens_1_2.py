"""Write the golden savepoints of format 1.2, with canonical dumps of schema 2.

    python -m compat_tests.generate_goldens_1_2              # all missing cases
    python -m compat_tests.generate_goldens_1_2 --list       # the cases and what they exercise
    python -m compat_tests.generate_goldens_1_2 --out DIR    # elsewhere (tests of the generator)

One case per addition of format 1.2 (spec/format.md §9.1) and cases that mix them.
As with ``generate_goldens`` (whose case layout, README and checks this follows),
``expected.json`` is computed from the values written, pyref must read exactly that,
and a case is written once: an existing case directory is never overwritten, and its
files are added to ``golden/SHA256SUMS``. A case whose savepoint uses no 1.2 feature
is labelled with its older version (spec/format.md §9.4) and goes to that set.
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

from compat_tests import GOLDEN_DIR
from compat_tests._build import (
    add_to_sums,
    command_line,
    corpus_files,
    fresh_dir,
    provenance,
    remove_lock,
    rescale_model,
    write_model,
)
from compat_tests.canonical import (
    BroadcastModel,
    KeyedModel,
    ListModel,
    OperatorModel,
    TimerModel,
    canonical_text,
    dump_savepoint,
    expected_from_model,
    first_difference,
)
from compat_tests.generate_goldens import Case, write_json, write_readme

SPLIT, UNION, BROADCAST = 1, 2, 3
EVENT_TIME, PROCESSING_TIME = 1, 2
SCHEMA = 2
PARALLELISMS = (1, 2, 3, 4)
MINUTE = 60_000
T0 = 1_735_689_600_000  # 2025-01-01T00:00:00Z


def _s():
    from pyref import serializers

    return serializers


def _ttl(*args):
    from pyref.ttl import TtlConfig

    return TtlConfig(*args)


def window(i: int, size: int = MINUTE):
    return _s().Window(i * size, (i + 1) * size)


def single(name: str, exercises: str, *operators_fn, parallelisms=PARALLELISMS, format_version: str = "1.2",
           **writer_options) -> Case:
    def build(case_dir: pathlib.Path) -> list[OperatorModel]:
        model = [op for fn in operators_fn for op in fn()]
        write_model(case_dir / "savepoint", model, **writer_options)
        return model

    return Case(name, exercises, build, tuple(parallelisms), writer_options, format_version)


# --------------------------------------------------------------------------
# Models, one per addition
# --------------------------------------------------------------------------


def users(n: int) -> list[str]:
    return [f"user-{i}" for i in range(n)]


def windowed_count_ops():
    """A tumbling-window count: per (user, window) a count, rows written twice for some
    (the later row wins), a namespaced MAP and LIST state beside it."""
    s = _s()
    rows, namespaces = [], []
    for i, user in enumerate(users(20)):
        for w in range(i % 3 + 1):
            rows.append((user, i * 10 + w))
            namespaces.append(window(w))
    # Rewritten counts: the same (key, namespace) again, later in state order.
    rows += [("user-1", 999), ("user-4", 998)]
    namespaces += [window(0), window(1)]
    by_page = [("user-0", "/a", 1), ("user-0", "/b", 2), ("user-0", "/a", 3), ("user-2", "/a", 4)]
    return [OperatorModel("window-counter", 2, 128, s.String(), [], [
        KeyedModel("count", "value", s.Int64(), rows, namespace_serializer=s.TimeWindow(), namespaces=namespaces),
        KeyedModel("by-page", "map", s.Int32(), by_page, user_key_serializer=s.String(),
                   namespace_serializer=s.TimeWindow(), namespaces=[window(0), window(0), window(0), window(2)]),
        KeyedModel("events", "list", s.String(), [("user-0", ["a", "b"]), ("user-3", [])],
                   namespace_serializer=s.TimeWindow(), namespaces=[window(5), window(5)]),
    ], uid="window-counter")]


def other_namespaces_ops():
    """Count windows (the global window) and a namespace of the program's own kind (a string)."""
    s = _s()
    return [OperatorModel("count-window", 2, 128, s.Int64(), [], [
        KeyedModel("buffer", "list", s.Int64(), [(k, list(range(k % 4))) for k in range(12)],
                   namespace_serializer=s.GlobalWindow(), namespaces=[None] * 12),
        KeyedModel("by-region", "value", s.String(), [(k, f"v{k}") for k in range(6)] + [(0, "again")],
                   namespace_serializer=s.String(), namespaces=["eu", "us", "eu", "", "ü", "eu", "us"]),
    ])]


def ttl_ops():
    """Every TTL cell layout: value, map value, list elements of fixed and variable width."""
    s = _s()
    keys = users(8)
    return [OperatorModel("sessions", 2, 128, s.String(), [], [
        KeyedModel("last-login", "value", s.Int64(), [(k, i) for i, k in enumerate(keys)],
                   ttl=_ttl(3_600_000), ttl_timestamps=[T0 + i for i in range(8)]),
        KeyedModel("carts", "map", s.Int32(), [(k, f"sku-{j}", j) for k in keys[:3] for j in range(2)],
                   user_key_serializer=s.String(), ttl=_ttl(86_400_000, "on_read_and_write"),
                   ttl_timestamps=[T0 - j for j in range(6)]),
        KeyedModel("clicks", "list", s.Int64(), [(k, list(range(i % 3))) for i, k in enumerate(keys)],
                   ttl=_ttl(1000, "on_create_and_write", "return_expired_if_not_cleaned_up"),
                   ttl_timestamps=[[T0 + j for j in range(i % 3)] for i in range(8)]),
        KeyedModel("pages", "list", s.String(), [("user-0", ["/", "/about"]), ("user-1", ["/x"])],
                   ttl=_ttl(5000), ttl_timestamps=[[T0, T0 + 7], [-1]]),
    ])]


def reducing_aggregating_ops():
    s = _s()
    accumulator = s.Tuple(s.Int64(), s.Int64(), names=("sum", "count"))
    return [OperatorModel("aggregates", 2, 128, s.Int32(), [], [
        KeyedModel("max", "reducing", s.Int64(), [(k, k * k) for k in range(10)]),
        KeyedModel("average", "aggregating", accumulator, [(k, (k * 10, k + 1)) for k in range(10)]),
    ])]


def timers_ops():
    """Event-time window timers (namespaced, one stored twice), processing-time timers of
    the same name, and a keyed state beside them."""
    s = _s()
    keys = users(16)
    window_timers = [(k, window(i % 2), window(i % 2).end - 1) for i, k in enumerate(keys)]
    window_timers.append(window_timers[0])  # a timer stored twice is one timer
    return [OperatorModel("windows", 3, 128, s.String(), [], [
        KeyedModel("count", "value", s.Int64(), [(k, 1) for k in keys], namespace_serializer=s.TimeWindow(),
                   namespaces=[window(i % 2) for i in range(16)]),
    ], timers=[
        TimerModel("window-timers", EVENT_TIME, window_timers, namespace_serializer=s.TimeWindow()),
        TimerModel("user-timers", PROCESSING_TIME, [(k, T0 + i) for i, k in enumerate(keys[:5])]),
        TimerModel("user-timers", EVENT_TIME, [("user-9", -1), ("user-9", 2**63 - 1)]),
    ])]


def broadcast_ops():
    """A broadcast map held by every subtask (stored once), and one whose copies differ."""
    s = _s()
    rules = [("deny", "/admin"), ("allow", "*"), ("rate", "100/s")]
    return [OperatorModel("router", 3, 128, None, [
        ListModel("offsets", SPLIT, s.Int64(), [[1], [2, 3], []]),
    ], broadcast=[
        BroadcastModel("rules", s.String(), s.String(), [list(rules)] * 3),
        BroadcastModel("versions", s.Int32(), s.Int64(), [[(1, 10)], [(1, 11), (2, 20)], []]),
    ])]


def coordinator_ops():
    s = _s()
    return [
        OperatorModel("kafka-source", 2, 128, None, [ListModel("splits", SPLIT, s.Bytes(), [[b"p0"], [b"p1"]])],
                      coordinator_state=bytes.fromhex("00000002") + b"topic\x00\x01" * 3, uid="kafka-source-uid",
                      engine_operator_id=bytes.fromhex("bc764cd8ddf7a0cff126f51c16239658")),
        OperatorModel("file-source", 1, 128, None, coordinator_state=incompressible(2000)),
        OperatorModel("empty-coordinator", 1, 128, None, coordinator_state=b""),
    ]


def incompressible(n: int) -> bytes:
    """``n`` bytes zstd cannot shrink (a SHA-256 chain), so a chunk of them goes to a data file."""
    import hashlib

    out, block = b"", b"seed"
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block
    return out[:n]


def kryo_key():
    return _s().Opaque("flink", "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot",
                       bytes.fromhex("0000000205") + b"com.example.Pojo")


def writer_assigned_ops():
    """Keys the writing engine hashed itself (a Kryo POJO): key groups come from the writer."""
    s = _s()
    keys = [b"\x01\x00pojo-" + bytes([i]) for i in range(12)]
    groups = [(i * 37) % 16 for i in range(12)]
    return [OperatorModel("pojo-keyed", 4, 16, kryo_key(), [], [
        KeyedModel("count", "value", s.Int64(), [(k, i) for i, k in enumerate(keys)], key_groups=groups),
    ], timers=[TimerModel("timers", EVENT_TIME, [(k, 1000 + i) for i, k in enumerate(keys[:6])],
                          key_groups=groups[:6])], writer_key_groups=True)]


def serializer_ops(sid: str, serializer_fn, values_fn, map_key: bool = True):
    """One 1.2 built-in as list element, keyed value, keyed list element, map value and map user key."""

    def ops():
        s = _s()
        ser, values = serializer_fn(), values_fn()
        half = (len(values) + 1) // 2
        keyed = [
            KeyedModel("value", "value", ser, [(i, v) for i, v in enumerate(values)]),
            KeyedModel("list", "list", ser, [(100, values), (101, []), (102, values[:1])]),
            KeyedModel("map", "map", ser, [(7, f"u{i}", v) for i, v in enumerate(values)],
                       user_key_serializer=s.String()),
        ]
        if map_key:
            keyed.append(KeyedModel("by", "map", s.Int32(), [(8, v, i) for i, v in enumerate(values)],
                                    user_key_serializer=ser))
        return [OperatorModel(f"op-{sid}", 2, 128, s.Int64(), [
            ListModel("elements", SPLIT, ser, [values[:half], values[half:]])], keyed)]

    return ops


def _f32(hex_bits: str) -> float:
    return struct.unpack(">f", bytes.fromhex(hex_bits))[0]


def serializer_cases() -> list[Case]:
    s = _s()
    colors = ["RED", "GREEN", "BLUE"]
    specs = [
        ("int8", s.Int8, lambda: [0, 1, -1, 127, -128], True),
        ("int16", s.Int16, lambda: [0, 300, -2, 2**15 - 1, -(2**15)], True),
        ("float32", s.Float32, lambda: [0.0, -0.0, 1.5, math.inf, -math.inf, _f32("7fc00000"), 3.4028234663852886e38,
                                       1.401298464324817e-45], False),
        ("char", s.Char, lambda: ["a", "\u0000", "é", "\ud800", "\uffff"], True),
        ("enum", lambda: s.Enum(colors), lambda: ["BLUE", "RED", "GREEN", "RED"], False),
        ("time-window", s.TimeWindow, lambda: [window(0), window(-1), s.Window(-(2**63), 2**63 - 1), s.Window(5, 5)],
         True),
        ("global-window", s.GlobalWindow, lambda: [None], True),
        ("opaque", kryo_key, lambda: [b"", b"\x01\x02\x03", bytes(range(200))], True),
    ]
    return [single(f"serializer-{sid}", f"format 1.2 built-in serializer `{sid}` as list element, keyed value, keyed "
                   "list element, map value" + (" and map key" if key else ""), serializer_ops(sid, fn, values, key))
            for sid, fn, values, key in specs]


def keys_ops():
    """The key types 1.2 makes hashable (spec/key-groups.md §3.7-§3.9), alone and in a tuple."""
    s = _s()
    specs = [("int8", s.Int8(), list(range(-128, 128, 7))), ("int16", s.Int16(), [-(2**15), -1, 0, 300, 2**15 - 1]),
             ("float32", s.Float32(), [0.0, -0.0, 1.5, -2.25, math.inf, _f32("7fc00000"), 1e-40]),
             ("char", s.Char(), ["a", "é", "\ud800", "\uffff", "\u0000"]),
             ("tuple", s.Tuple(s.Int8(), s.Char(), names=("shard", "letter")), [(i, chr(97 + i)) for i in range(8)])]
    return [OperatorModel(f"keys-{name}", 3, 64, key, [],
                          [KeyedModel("count", "value", s.Int64(), [(k, i) for i, k in enumerate(keys)])])
            for name, key, keys in specs]


def windowed_job_ops():
    """The parts of a real windowed job together: a source with offsets and coordinator state,
    a window operator with namespaced counts, window timers and a TTL state, broadcast rules."""
    s = _s()
    keys = users(60)
    counts, namespaces = [], []
    for i, k in enumerate(keys):
        for w in range(10):
            counts.append((k, (i + w) % 7))
            namespaces.append(window(w))
    return [
        OperatorModel("source", 2, 128, None, [ListModel("offsets", SPLIT, s.Int64(), [[100, 101], [200]])],
                      coordinator_state=b"\x00\x00\x00\x01enumerator", uid="source"),
        OperatorModel("window-counter", 3, 256, s.String(), [], [
            KeyedModel("count", "value", s.Int64(), counts, namespace_serializer=s.TimeWindow(),
                       namespaces=namespaces),
            KeyedModel("seen", "value", s.Boolean(), [(k, True) for k in keys[:20]], ttl=_ttl(600_000),
                       ttl_timestamps=[T0] * 20),
        ], timers=[TimerModel("window-timers", EVENT_TIME, [(k, window(9), window(9).end - 1) for k in keys],
                              namespace_serializer=s.TimeWindow())],
            broadcast=[BroadcastModel("rules", s.String(), s.Enum(["ALLOW", "DENY"]),
                                      [[("/admin", "DENY"), ("/", "ALLOW")]] * 3)], uid="window-counter"),
    ]


def derived_case(name: str, exercises: str, parallelism: int, copy: bool) -> Case:
    """The windowed job rescaled to ``parallelism``: shallow (beside ``base/``) or a copy."""

    def build(case_dir: pathlib.Path) -> list[OperatorModel]:
        from pyref import rescale

        model = windowed_job_ops()
        write_model(case_dir / "base", model, inline_bytes=0, chunk_bytes=2048)
        rescale(str(case_dir / "base"), str(case_dir / "savepoint"), parallelism, copy=copy)
        remove_lock(case_dir / "savepoint")
        return rescale_model(model, parallelism)

    return Case(name, exercises, build, PARALLELISMS, {"inline_bytes": 0, "chunk_bytes": 2048}, "1.2")


def informative_ops():
    """Only the informative 1.2 fields: uid, engine operator id, engine serializer snapshots."""
    from pyref._proto.savepoint.v1 import serializer_pb2

    s = _s()
    value = s.Int64()
    engine = serializer_pb2.EngineSerializer(engine="flink", class_name="org.apache.flink.api.common.typeutils.base."
                                             "LongSerializer$LongSerializerSnapshot", snapshot=b"\x00\x00\x00\x03")
    snapshot = value.snapshot()
    snapshot.engine.CopyFrom(engine)
    return [OperatorModel("counter", 2, 128, s.String(), [], [
        KeyedModel("count", "value", value, [(k, i) for i, k in enumerate(users(10))], value_snapshot=snapshot),
    ], uid="counter-uid", engine_operator_id=bytes(16))]


def informative_case() -> Case:
    """Engine snapshots only reach the manifest through a snapshot override: set it after writing."""

    def build(case_dir: pathlib.Path) -> list[OperatorModel]:
        from compat_tests._build import rewrite_manifest

        model = informative_ops()
        write_model(case_dir / "savepoint", model)
        engine = model[0].keyed[0].value_snapshot.engine
        rewrite_manifest(case_dir / "savepoint",
                         lambda m: m.operators[0].keyed_states[0].value_serializer.engine.CopyFrom(engine))
        return model

    return Case("informative-1-2-fields", "a writer of format 1.2 using only its informative fields (operator uid "
                "and engine id, an engine serializer snapshot): no feature, so the savepoint keeps the label 1.0 and "
                "a 1.0 reader reads it", build, PARALLELISMS, {}, "1.0")


def cases() -> list[Case]:
    out = [
        single("keyed-namespaces-time-window", "keyed state under time-window namespaces (VALUE, MAP, LIST); rows "
               "rewritten later in state order win per (key, namespace[, user key])", windowed_count_ops),
        single("keyed-namespaces-other", "namespaces other than time windows: the global window (count windows) "
               "and a string namespace", other_namespaces_ops),
        single("state-ttl", "TTL cells: VALUE, MAP values, LIST elements of fixed and variable width; every "
               "update type and visibility", ttl_ops),
        single("reducing-aggregating-state", "the REDUCING and AGGREGATING kinds (stored like VALUE; a tuple "
               "accumulator)", reducing_aggregating_ops),
        single("timers", "timer services: namespaced event-time timers (one stored twice), processing-time timers, "
               "one name in both domains; timers restore with their key groups", timers_ops,
               parallelisms=(1, 2, 3, 4, 7)),
        single("broadcast-state", "broadcast map state: one map shared by every partition, and partitions that differ; "
               "restored as old partition i mod old_p", broadcast_ops, parallelisms=(1, 2, 3, 4, 5)),
        single("coordinator-state", "operator coordinator state inline, in a data file and empty; operator uid and "
               "engine id", coordinator_ops, inline_bytes=512),
        single("writer-assigned-key-groups", "key groups assigned by the writer for opaque (Kryo) keys, keyed state "
               "and timers; readers take them from the chunks", writer_assigned_ops),
        *serializer_cases(),
        single("keys-1-2", "the key hash of the 1.2 key types int8, int16, float32, char and a tuple of them",
               keys_ops),
        single("windowed-job", "every 1.2 part of a windowed job together: coordinator state, namespaced counts "
               "(keys x 10 windows), window timers, TTL state, broadcast rules with enum values; zstd chunks in "
               "data files, several per key group", windowed_job_ops, inline_bytes=0, chunk_bytes=2048),
        derived_case("windowed-job-rescaled", "the windowed job rescaled 3 -> 2 as a shallow savepoint: timer chunks "
                     "by reference, broadcast partitions re-cut, coordinator state kept", 2, copy=False),
        derived_case("windowed-job-copy", "the windowed job rescaled 3 -> 5 as a self-contained copy", 5, copy=True),
        informative_case(),
    ]
    names = [c.name for c in out]
    assert len(names) == len(set(names)), names
    return out


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def generate_case(case: Case, target: pathlib.Path, command: str) -> None:
    """Build one case in a temporary directory, check it against its schema 2 dump, move it into place."""
    if target.exists():
        raise SystemExit(f"{target} exists: goldens are written once and never overwritten")
    tmp = fresh_dir(target)
    try:
        model = case.build(tmp)
        expected = expected_from_model(model, case.parallelisms, case.format_version, SCHEMA)
        actual = dump_savepoint(tmp / "savepoint", case.parallelisms, SCHEMA)
        if canonical_text(actual) != canonical_text(expected):
            raise SystemExit(f"{case.name}: pyref does not read what was written: {first_difference(expected, actual)}")
        write_json(tmp / "expected.json", expected)
        write_json(tmp / "generated.json", {"case": case.name, "exercises": case.exercises,
                                            "format_version": case.format_version,
                                            "parallelisms": list(case.parallelisms),
                                            "writer_options": case.writer_options, **provenance(command)})
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def generate(out: pathlib.Path, only: list[str] | None = None,
             case_list: Callable[[], list[Case]] = cases) -> list[str]:
    """Write every missing case (or only the named ones); returns the names written."""
    command = command_line()
    selected = [c for c in case_list() if not only or c.name in only]
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
            print(f"{c.name} [{c.format_version}]: {c.exercises}")
        return 0
    made = generate(args.out, args.case)
    print(f"{len(made)} golden cases written under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
