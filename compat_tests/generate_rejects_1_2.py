"""Write the reject and forward cases of format 1.2: one reject case per rule 1.2 added.

    python -m compat_tests.generate_rejects_1_2            # all missing cases
    python -m compat_tests.generate_rejects_1_2 --list

Cases go to ``reject/1.2/<case>/`` and ``forward/1.2/<case>/``, beside the older ones
(the kit finds cases at any depth) and hashed in the same ``SHA256SUMS``. As with
``generate_rejects``, whose mutation helpers they use, each case starts from a valid
savepoint, here one with every 1.2 part (:func:`base_model`); pyref must refuse a
reject case with its category, and read a forward case exactly as ``expected.json``
(schema 2) says, before the case is kept. Cases are written once.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
from collections.abc import Callable

from compat_tests import FORWARD_DIR, REJECT_DIR
from compat_tests._build import add_to_sums, command_line, corpus_files, fresh_dir, provenance, write_model
from compat_tests.canonical import (
    BroadcastModel,
    KeyedModel,
    ListModel,
    OperatorModel,
    TimerModel,
    canonical_text,
    dump_savepoint,
    error_category,
    expected_from_model,
    first_difference,
)
from compat_tests.generate_rejects import (
    ForwardCase,
    RejectCase,
    Savepoint,
    _write_json,
    add_unknown_fields,
    inline_chunk,
    key_group_of,
    manifest_case,
    payload_of,
    replace_values,
    snapshot,
    write_readme,
)

VERSION_DIR = "1.2"
REJECT_PARALLELISMS = (1, 2)
FORWARD_PARALLELISMS = (1, 2, 3)
SCHEMA = 2


def _s():
    from pyref import serializers

    return serializers


def _pb():
    from pyref._proto.savepoint.v1 import manifest_pb2

    return manifest_pb2


def base_model() -> list[OperatorModel]:
    """A source with list state, and a keyed operator with every 1.2 part."""
    from pyref.ttl import TtlConfig

    s = _s()
    keys = [f"key-{i}" for i in range(20)]
    w0, w1 = s.Window(0, 60000), s.Window(60000, 120000)
    return [
        OperatorModel("source", 2, 128, None, [ListModel("offsets", 1, s.Int64(), [[1, 2, 3], [4, 5]])]),
        OperatorModel("counter", 2, 128, s.String(), [], [
            KeyedModel("count", "value", s.Int64(), [(k, i) for i, k in enumerate(keys)]),
            KeyedModel("windowed", "value", s.Int64(), [(k, i) for i, k in enumerate(keys)],
                       namespace_serializer=s.TimeWindow(), namespaces=[w0, w1] * 10),
            KeyedModel("ttl", "value", s.Int64(), [(k, i) for i, k in enumerate(keys[:5])], ttl=TtlConfig(60000),
                       ttl_timestamps=[1000 * i for i in range(5)]),
            KeyedModel("sum", "reducing", s.Int64(), [(k, 1) for k in keys[:5]]),
        ], timers=[TimerModel("window-timers", 1, [(k, w0, 59999) for k in keys], namespace_serializer=s.TimeWindow())],
            broadcast=[BroadcastModel("rules", s.String(), s.String(), [[("deny", "/admin"), ("allow", "*")]] * 2)],
            coordinator_state=b"\x00\x01coordinator"),
    ]


# --------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------


def _drop_feature(name: str) -> Callable[[Savepoint], None]:
    return lambda sp: sp.manifest.required_features.remove(name)


def _timers(sp: Savepoint):
    return sp.op("counter").timer_services[0]


def _rules(sp: Savepoint):
    return sp.op("counter").broadcast_states[0]


def _set(obj, **values):
    for k, v in values.items():
        setattr(obj, k, v)


def _timer_payload(sp: Savepoint, columns: list[list[bytes]]) -> None:
    """window-timers holds one inline chunk of ``columns`` under key-0's key group."""
    service = _timers(sp)
    del service.chunks[:]
    service.chunks.append(inline_chunk(payload_of(columns), len(columns[0]), key_group_of("key-0")))


def _window(start: int) -> bytes:
    return _s().TimeWindow().encode((start, start + 60000))


def _short_ttl_cell(sp: Savepoint) -> None:
    ks = sp.keyed("ttl")
    del ks.chunks[:]
    key = _s().String().encode("doc")
    ks.chunks.append(inline_chunk(payload_of([[key], [b"\x01\x02\x03"]]), 1, key_group_of("doc")))


def _repeat_broadcast_key(sp: Savepoint) -> None:
    _rules(sp).partitions[1].ranges.append(_pb().ElementRange(chunk=0, first=0, count=1))


def _clash(sp: Savepoint) -> None:
    _rules(sp).name = "count"


def _timers_on_source(sp: Savepoint) -> None:
    sp.op("source").timer_services.append(_timers(sp))


def _two_coordinator_rows(sp: Savepoint) -> None:
    op = sp.op("counter")
    payload = payload_of([[b"a", b"b"]])
    op.coordinator_state.CopyFrom(inline_chunk(payload, 2))


def _reverse_timer_chunks(sp: Savepoint) -> None:
    service = _timers(sp)
    chunks = list(service.chunks)[::-1]
    del service.chunks[:]
    service.chunks.extend(chunks)


def _enum(*symbols: str):
    return snapshot("enum", symbols=list(symbols))


def reject_cases() -> list[RejectCase]:
    s = _s()
    w = _window(0)
    key = s.String().encode("key-0")
    cases = [
        # M9: a 1.2 part used without its required feature listed
        *(manifest_case(f"feature-{feature}-not-listed", "corrupt",
                        f"uses what the required feature `{feature}` adds without listing it (rule M9)",
                        _drop_feature(feature))
          for feature in ("timers", "broadcast-state", "coordinator-state", "keyed-namespaces", "state-ttl",
                          "reducing-aggregating-state", "serializers-1-2")),
        manifest_case("feature-writer-assigned-key-groups-not-listed", "corrupt",
                      "an operator with writer-assigned key groups, the feature not listed (rule M9)",
                      lambda sp: _set(sp.op("source"), key_groups=1)),
        # O3, O4, O6, O7
        manifest_case("broadcast-state-named-like-a-keyed-state", "corrupt",
                      "a broadcast state and a keyed state share a name (rule O3)", _clash),
        manifest_case("timers-without-key-serializer", "corrupt",
                      "an operator with a timer service and no key serializer (rule O4)", _timers_on_source),
        manifest_case("key-group-assignment-unknown", "unsupported-feature",
                      "Operator.key_groups = 2, a value newer than 1.2 (rule O6)",
                      lambda sp: _set(sp.op("counter"), key_groups=2)),
        manifest_case("coordinator-state-two-rows", "corrupt", "coordinator state of two rows (rule O7)",
                      _two_coordinator_rows),
        manifest_case("coordinator-state-with-key-group", "corrupt", "coordinator state with a key group (rule O7)",
                      lambda sp: _set(sp.op("counter").coordinator_state, key_group=3)),
        # K1, K5, K7, TTL cells
        manifest_case("keyed-state-kind-6", "unsupported-feature", "keyed state kind 6, newer than 1.2 (rule K1)",
                      lambda sp: _set(sp.keyed("sum"), kind=6)),
        manifest_case("namespace-serializer-without-namespace-column", "corrupt",
                      "a state with a namespace serializer whose chunks have no namespace column (rule K5, P2)",
                      lambda sp: sp.keyed("count").namespace_serializer.CopyFrom(s.TimeWindow().snapshot())),
        manifest_case("ttl-zero", "corrupt", "TtlConfig.ttl_ms = 0 (rule K7)",
                      lambda sp: _set(sp.keyed("ttl").ttl, ttl_ms=0)),
        manifest_case("ttl-update-type-unspecified", "corrupt", "TtlConfig.update_type = 0 (rule K7)",
                      lambda sp: _set(sp.keyed("ttl").ttl, update_type=0)),
        manifest_case("ttl-visibility-unknown", "unsupported-feature", "TtlConfig.visibility = 3, newer than 1.2 "
                      "(rule K7)", lambda sp: _set(sp.keyed("ttl").ttl, visibility=3)),
        manifest_case("ttl-cell-shorter-than-timestamp", "corrupt", "a TTL cell of 3 bytes, less than its 8-byte "
                      "timestamp (§7.8)", _short_ttl_cell),
        # T1-T5
        manifest_case("timer-services-same-name-and-domain", "corrupt", "two timer services of one name and domain "
                      "(rule T1)", lambda sp: sp.op("counter").timer_services.append(_timers(sp))),
        manifest_case("timer-domain-unspecified", "corrupt", "TimerService.domain = 0 (rule T2)",
                      lambda sp: _set(_timers(sp), domain=0)),
        manifest_case("timer-domain-unknown", "unsupported-feature", "TimerService.domain = 3, newer than 1.2 "
                      "(rule T2)", lambda sp: _set(_timers(sp), domain=3)),
        manifest_case("timer-key-group-out-of-range", "corrupt", "a timer chunk of key group 128 at max parallelism "
                      "128 (rule T3)", lambda sp: _set(_timers(sp).chunks[-1], key_group=128)),
        manifest_case("timer-chunks-not-ordered", "corrupt", "timer chunks not ordered by key group (rule T3)",
                      _reverse_timer_chunks),
        manifest_case("timer-chunk-without-namespace-column", "corrupt", "a namespaced timer service whose chunk "
                      "has 2 columns (rules T4, P2)", lambda sp: _timer_payload(sp, [[key], [s.Int64().encode(1)]])),
        manifest_case("timer-timestamp-wrong-width", "corrupt", "a timer timestamp of 4 bytes (rule T5)",
                      lambda sp: _timer_payload(sp, [[key], [w], [b"\x01\x00\x00\x00"]])),
        # B2-B5
        manifest_case("broadcast-state-without-key-serializer", "corrupt", "a broadcast state without key serializer "
                      "(rule B2)", lambda sp: _rules(sp).ClearField("key_serializer")),
        manifest_case("broadcast-partition-count-mismatch", "corrupt", "a broadcast state of 1 partition at "
                      "parallelism 2 (rule B3)", lambda sp: _rules(sp).partitions.pop()),
        manifest_case("broadcast-chunk-with-key-group", "corrupt", "a broadcast chunk with a key group (rule B4)",
                      lambda sp: _set(_rules(sp).chunks[0], key_group=1)),
        manifest_case("broadcast-range-outside-chunk", "corrupt", "a broadcast partition range past its chunk's "
                      "rows (rules B4, L5)", lambda sp: _set(_rules(sp).partitions[0].ranges[0], count=3)),
        manifest_case("broadcast-partition-repeats-key", "corrupt", "a broadcast partition holding one key twice "
                      "(rule B5)", _repeat_broadcast_key),
        # The 1.2 built-in serializers (spec/serializers.md §3.13-§3.20)
        manifest_case("serializer-enum-ordinal-out-of-range", "corrupt", "an enum value with ordinal 3 of 3 symbols",
                      lambda sp: replace_values(sp, _enum("A", "B", "C"), [b"\x03\x00\x00\x00"])),
        manifest_case("serializer-enum-without-symbols", "corrupt", "an enum snapshot without symbols",
                      lambda sp: replace_values(sp, _enum(), [b"\x00\x00\x00\x00"])),
        manifest_case("serializer-enum-duplicate-symbols", "corrupt", "an enum snapshot naming a symbol twice",
                      lambda sp: replace_values(sp, _enum("A", "A"), [b"\x00\x00\x00\x00"])),
        manifest_case("serializer-symbols-on-int8", "corrupt", "symbols on a snapshot that is not enum",
                      lambda sp: replace_values(sp, snapshot("int8", symbols=["A"]), [b"\x01"])),
        manifest_case("serializer-opaque-without-engine", "corrupt", "an opaque snapshot without the engine's "
                      "serializer", lambda sp: replace_values(sp, snapshot("opaque"), [b"\x01"])),
        manifest_case("serializer-global-window-nonzero", "corrupt", "a global window encoded as 0x01",
                      lambda sp: replace_values(sp, snapshot("global-window"), [b"\x01"])),
        manifest_case("serializer-time-window-truncated", "corrupt", "a time window of 15 bytes",
                      lambda sp: replace_values(sp, snapshot("time-window"), [w[:15]])),
        manifest_case("serializer-int16-wrong-width", "corrupt", "an int16 of 3 bytes",
                      lambda sp: replace_values(sp, snapshot("int16"), [b"\x01\x00\x00"])),
        manifest_case("serializer-map-key-float32", "corrupt", "a map keyed by float32, which has no byte equality",
                      lambda sp: replace_values(sp, snapshot("map", nested=[snapshot("float32"), snapshot("int8")]),
                                                [b"\x00\x00\x00\x00"])),
        manifest_case("serializer-time-window-version-too-new", "unsupported-feature", "a time-window snapshot of "
                      "version 2", lambda sp: replace_values(sp, snapshot("time-window", version=2), [w])),
        manifest_case("opaque-keys-with-hashed-key-groups", "unsupported-feature", "keys of an opaque serializer "
                      "(no key hash) in an operator whose key groups are hashed",
                      lambda sp: sp.op("counter").key_serializer.CopyFrom(
                          snapshot("opaque", engine={"engine": "flink", "class_name": "x.Pojo"}))),
    ]
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    return cases


def forward_cases() -> list[ForwardCase]:
    def future(sp: Savepoint):
        sp.manifest.optional_features.append("x-future-timer-index")
        sp.op("counter").keyed_states[0].value_serializer.engine.engine = "flink"  # a 1.2 message to extend too
        add_unknown_fields(sp.manifest)
        return 9

    return [ForwardCase("unknown-fields-in-1-2-messages", "version 1.9: unknown fields in every message, those 1.2 "
                        "added included (TimerService, BroadcastState, TtlConfig, EngineSerializer), and an unknown "
                        "optional feature, in a savepoint using every 1.2 part", future)]


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def _write_source(case_dir: pathlib.Path) -> list[OperatorModel]:
    model = base_model()
    write_model(case_dir / "savepoint", model, inline_bytes=0)
    return model


def generate_reject(case: RejectCase, target: pathlib.Path, command: str) -> None:
    from pyref.errors import SavepointError

    tmp = fresh_dir(target)
    try:
        _write_source(tmp)
        case.mutate(tmp)
        try:
            dump_savepoint(tmp / "savepoint", REJECT_PARALLELISMS, SCHEMA)
        except SavepointError as exc:
            got = error_category(exc, tmp / "savepoint")
            if got != case.category:
                raise SystemExit(f"reject/{case.name}: pyref refuses it as {got!r}, expected {case.category!r}: {exc}")
        else:
            raise SystemExit(f"reject/{case.name}: pyref reads it; every reader must refuse it ({case.breaks})")
        _write_json(tmp / "expected_error.json", {"category": case.category, "breaks": case.breaks,
                                                  "parallelisms": list(REJECT_PARALLELISMS)})
        _write_json(tmp / "generated.json", {"case": case.name, **provenance(command)})
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def generate_forward(case: ForwardCase, target: pathlib.Path, command: str) -> None:
    tmp = fresh_dir(target)
    try:
        model = _write_source(tmp)
        sp = Savepoint(tmp / "savepoint")
        minor = case.change(sp)
        sp.save(minor)
        # The engine serializer the change added shows in the dump: the model's snapshot has it too.
        counter = next(op for op in model if op.operator_id == "counter")
        value = counter.keyed[0]
        value.value_snapshot = value.value_serializer.snapshot()
        value.value_snapshot.engine.engine = "flink"
        expected = expected_from_model(model, FORWARD_PARALLELISMS, f"1.{minor}", SCHEMA)
        actual = dump_savepoint(tmp / "savepoint", FORWARD_PARALLELISMS, SCHEMA)
        if canonical_text(actual) != canonical_text(expected):
            raise SystemExit(f"forward/{case.name}: pyref does not restore it as expected: "
                             f"{first_difference(expected, actual)}")
        _write_json(tmp / "expected.json", expected)
        _write_json(tmp / "generated.json", {"case": case.name, "exercises": case.exercises, **provenance(command)})
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def generate(reject_root: pathlib.Path, forward_root: pathlib.Path, only: list[str] | None = None) -> list[str]:
    command = command_line()
    made: list[str] = []
    for root, items, make, title in ((reject_root, reject_cases(), generate_reject, "Reject corpus, format 1.2"),
                                     (forward_root, forward_cases(), generate_forward,
                                      "Forward-compatibility corpus, format 1.2")):
        version_dir = root / VERSION_DIR
        version_dir.mkdir(parents=True, exist_ok=True)
        new_files = []
        for case in items:
            if only and case.name not in only:
                continue
            target = version_dir / case.name
            if target.exists():
                print(f"exists, kept: {target}")
                continue
            make(case, target, command)
            made.append(case.name)
            new_files += [f"{VERSION_DIR}/{case.name}/{rel}" for rel in corpus_files(target)]
            print(f"wrote {target}")
        add_to_sums(root, new_files)
        rows = [(c.name, f"`{c.category}`" if isinstance(c, RejectCase) else "restores",
                 c.breaks if isinstance(c, RejectCase) else c.exercises)
                for c in items if (version_dir / c.name).exists()]
        write_readme(version_dir, title, "Cases for the rules and parts format 1.2 added (spec/format.md §9.1), made "
                     "by `compat_tests/generate_rejects_1_2.py` from a valid savepoint using every 1.2 part; written "
                     "once, hashed in `../SHA256SUMS`.", rows)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reject-out", type=pathlib.Path, default=REJECT_DIR)
    parser.add_argument("--forward-out", type=pathlib.Path, default=FORWARD_DIR)
    parser.add_argument("--case", action="append", help="generate only this case (repeatable)")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        for c in reject_cases():
            print(f"reject/{VERSION_DIR}/{c.name} [{c.category}]: {c.breaks}")
        for f in forward_cases():
            print(f"forward/{VERSION_DIR}/{f.name}: {f.exercises}")
        return 0
    made = generate(args.reject_out, args.forward_out, args.case)
    print(f"{len(made)} cases written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
