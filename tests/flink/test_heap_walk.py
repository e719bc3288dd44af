"""The heap checkpoint reader's block walks (pyref.flink.heap_walk) give exactly the rows and the
errors of its per-entry path: on every committed real HashMap-backend checkpoint (Flink 1.20.3,
2.0.2, 2.3.0: every keyed kind, TTL, POJOs, windows, timers, compressed and not) read both ways,
on hand-made blocks of each common shape, and on hostile blocks, which the walks hand back to the
per-entry path and its typed errors."""

from __future__ import annotations

import pathlib
import random
import struct

import pytest

from pyref.errors import CorruptSavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint, heap_walk
from pyref.flink.datainput import DataInput
from pyref.flink.dataoutput import string_value
from pyref.flink.heap import StateDecoder, _StateRows
from pyref.flink.meta_info import StateMetaInfo
from pyref.flink.serializers import FlinkType
from pyref.flink.values import codec_for

from compat_tests.flink.checkpoints import committed_snapshot

DATA = pathlib.Path(__file__).resolve().parent / "data" / "checkpoints"
#: The HashMap backend's checkpoints (of the changelog backend too: its materialized snapshot), but the
#: changelog's taken before any materialization (the in-memory storage's, the session windows') and those
#: of operator state only (nothing keyed to walk).
HEAP_CASES = sorted(p.name for p in DATA.glob("*hashmap*")
                    if ("changelog" not in p.name or "materialized" in p.name) and not p.name.endswith("operator-state"))


def _rows(path: pathlib.Path) -> list:
    with FlinkSavepoint.open(path) as sp:
        return [(name, r.subtasks.tolist(), r.key_groups.tolist(), r.keys.to_pylist(), r.values.to_pylist())
                for op in sp.operators if any(s.managed_keyed_state for s in op.state.subtasks)
                for sub in op.keyed_subtasks() for name, (_, r) in sorted(sub.states.items())]


@pytest.mark.parametrize("case", HEAP_CASES)
def test_real_heap_checkpoints_read_the_same_walked_and_per_entry(case: str, tmp_path: pathlib.Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = committed_snapshot(DATA / case, tmp_path)
    monkeypatch.setattr(heap_walk, "_MIN_ENTRIES", 2**31)  # every block per entry
    per_entry = _rows(path)
    walked = []
    real_rows = heap_walk.BlockWalker.rows

    def counted(self: heap_walk.BlockWalker, *args: object) -> object:
        out = real_rows(self, *args)  # type: ignore[arg-type]
        walked.append(out is not None)
        return out

    monkeypatch.setattr(heap_walk, "_MIN_ENTRIES", 1)  # every block a walk can take walked
    monkeypatch.setattr(heap_walk.BlockWalker, "rows", counted)
    assert _rows(path) == per_entry
    assert sum(walked) > 0, case


# -- hand-made blocks of each shape -------------------------------------------------------------

def _t(kind: str, *children: FlinkType, length: int = -1, **kw: object) -> FlinkType:
    return FlinkType(kind, "", 0, b"", tuple(children), length, **kw)  # type: ignore[arg-type]


LONG, INT, DOUBLE = _t("int64", length=8), _t("int32", length=4), _t("float64", length=8)
STRING, VOID, WINDOW = _t("string"), _t("void-namespace", length=1), _t("time-window", length=16)
POJO = _t("pojo", LONG, INT, DOUBLE, type_name="org.example.Stats", field_names=("count", "flag", "sum"))
N = 20


def _state(kind: str, value: FlinkType, namespace: FlinkType = VOID) -> StateMetaInfo:
    if kind == "TIMERS":
        return StateMetaInfo("_timer_state/event_user-timers", "PRIORITY_QUEUE", {}, {"VALUE_SERIALIZER": value})
    return StateMetaInfo("s", "KEY_VALUE", {"KEYED_STATE_TYPE": kind},
                         {"VALUE_SERIALIZER": value, "NAMESPACE_SERIALIZER": namespace})


def _i32(v: int) -> bytes:
    return struct.pack(">i", v)


def _i64(v: int) -> bytes:
    return struct.pack(">q", v)


def _key(i: int) -> bytes:
    return string_value(f"k{i:0{1 + i % 4}d}")  # keys of several lengths


def _uniform(i: int) -> bytes:
    return string_value(f"u{i:05d}")  # keys of one width: each entry as wide as the first


def _pojo(i: int) -> bytes:
    return b"\x02" + b"\x00" + _i64(i) + b"\x00" + _i32(i) + b"\x00" + _i64(-i)


def _window(i: int) -> bytes:
    return _i64(i * 1000) + _i64(i * 1000 + 1000)


def _list(i: int) -> bytes:
    return _i32(i % 3) + b"".join(_i64(i * 10 + e) for e in range(i % 3))  # some empty: no row


def _map(i: int) -> bytes:
    return _i32(2) + string_value("a") + b"\x00" + _i64(i) + string_value(f"b{i}") + b"\x01"  # b: null value


def _block(entry, n: int = N) -> bytes:
    return _i32(n) + b"".join(entry(i) for i in range(n))


#: name -> (state, key type, block, walked): each shape walks; a value the walk does not assume
#: (a null or non-ASCII string, a POJO's null field or subclass) sends its block per entry.
SHAPES = {
    "string key, Long value": (_state("VALUE", LONG), STRING, _block(lambda i: b"\x00" + _key(i) + _i64(i)), True),
    "Long key, POJO value": (_state("VALUE", POJO), LONG, _block(lambda i: b"\x00" + _i64(i) + _pojo(i)), True),
    "Long key, Tuple2 value": (_state("VALUE", _t("tuple", LONG, LONG, length=16)), LONG,
                               _block(lambda i: b"\x00" + _i64(i) + _i64(i) + _i64(-i)), True),
    "window namespace": (_state("REDUCING", LONG, WINDOW), STRING, _block(lambda i: _window(i) + _key(i) + _i64(i)),
                         True),
    "String value": (_state("VALUE", STRING), LONG, _block(lambda i: b"\x00" + _i64(i) + _key(i) * (i % 2)
                                                           + string_value("") * (1 - i % 2)), True),
    "TTL String value": (_state("VALUE", _t("ttl", LONG, STRING)), LONG,
                         _block(lambda i: b"\x00" + _i64(i) + _i64(7) + _key(i)), True),
    "LIST of Longs": (_state("LIST", _t("list", LONG)), STRING, _block(lambda i: b"\x00" + _key(i) + _list(i)), True),
    "LIST of POJOs": (_state("LIST", _t("list", POJO)), LONG,
                      _block(lambda i: b"\x00" + _i64(i) + _i32(2) + _pojo(i) + _pojo(i + 1)), True),
    "LIST of Strings": (_state("LIST", _t("list", STRING)), LONG, _block(
        lambda i: b"\x00" + _i64(i) + _i32(i % 3) + b"".join(_key(e) for e in range(i % 3))), True),
    "LIST of POJOs with a String": (_state("LIST", _t("list", _t("pojo", STRING, LONG, field_names=("a", "b")))),
                                    STRING, _block(lambda i: b"\x00" + _key(i) + _i32(2)
                                                   + (b"\x02\x00" + _key(i) + b"\x00" + _i64(i)) * 2), True),
    "MAP Int -> TTL String": (_state("MAP", _t("map", INT, _t("ttl", LONG, STRING))), STRING, _block(
        lambda i: b"\x00" + _key(i) + _i32(2) + _i32(1) + b"\x00" + _i64(5) + _key(i) + _i32(2) + b"\x01"), True),
    "MAP String -> Long": (_state("MAP", _t("map", STRING, LONG)), STRING,
                           _block(lambda i: b"\x00" + _key(i) + _map(i)), True),
    "MAP Long -> String": (_state("MAP", _t("map", LONG, STRING)), STRING,
                           _block(lambda i: b"\x00" + _key(i) + _i32(1) + _i64(i) + b"\x00" + _key(i)), True),
    "timers": (_state("TIMERS", _t("timer", STRING, WINDOW)), STRING,
               _block(lambda i: _i64(i - 2**63) + _key(i) + _window(i)), True),
    "keys of one width": (_state("VALUE", LONG), STRING, _block(lambda i: b"\x00" + _uniform(i) + _i64(i)), True),
    "keys of one width, the last longer": (_state("VALUE", LONG), STRING, _block(
        lambda i: b"\x00" + (_key(10**6) if i == N - 1 else _uniform(i)) + _i64(i)), True),
    "one-element LISTs": (_state("LIST", _t("list", LONG)), STRING,
                          _block(lambda i: b"\x00" + _uniform(i) + _i32(1) + _i64(i)), True),
    "one-element LISTs but one": (_state("LIST", _t("list", LONG)), STRING, _block(
        lambda i: b"\x00" + _uniform(i) + _i32(1 + (i == 9)) + _i64(i) * (1 + (i == 9))), True),
    "a null String": (_state("VALUE", STRING), LONG,
                      _block(lambda i: b"\x00" + _i64(i) + (b"\x00" if i == 7 else _key(i))), False),
    "a non-ASCII String": (_state("VALUE", LONG), STRING,
                           _block(lambda i: b"\x00" + string_value("k\u00e9" if i == 3 else f"k{i}") + _i64(i)), False),
    "Strings of 200 and 20000 chars": (_state("VALUE", LONG), STRING, _block(
        lambda i: b"\x00" + string_value("x" * {5: 200, 6: 20000}.get(i, 3)) + _i64(i)), True),
    "a MAP of long Strings": (_state("MAP", _t("map", STRING, STRING)), LONG, _block(
        lambda i: b"\x00" + _i64(i) + _i32(1) + string_value("k" * 300) + b"\x00" + string_value("v" * 150 * i)), True),
    "a POJO's null field": (_state("VALUE", POJO), LONG,
                            _block(lambda i: b"\x00" + _i64(i) + (b"\x02\x01\x00" + _i32(1) + b"\x00" + _i64(1)
                                                                  if i == 9 else _pojo(i))), False),
    "a null POJO": (_state("VALUE", POJO), LONG,
                    _block(lambda i: b"\x00" + _i64(i) + (b"\x01" if i == 2 else _pojo(i))), False),
    "a MAP null flag of 2": (_state("MAP", _t("map", STRING, LONG)), STRING,
                             _block(lambda i: b"\x00" + _key(i) + _i32(1) + string_value("a") + b"\x02"), False),
}


def _both_ways(state: StateMetaInfo, key: FlinkType, block: bytes) -> tuple[object, object, bool]:
    """(walked rows or error, per-entry rows or error, whether the walk took the block)."""
    decoder = StateDecoder(state, codec_for(key), 2)
    assert decoder.walker is not None
    data = block + b"\x00\x07"  # the next state's id follows a block
    took = decoder.walker.rows(data, 0, len(data), 300, 2) is not None
    out: list[object] = []
    for walk in (True, False):
        inp = DataInput(data, base=1000, path="stream")
        rows = _StateRows()
        try:
            if walk:
                rows.block(decoder, inp, 300)
            else:
                decoder.read(inp, 300, rows.keys, rows.values)
                rows.groups += [300] * len(rows.keys)
        except (CorruptSavepointError, UnsupportedFormatError) as exc:
            out.append((type(exc), str(exc), exc.byte_range))
            continue
        r = rows.rows(0)
        out.append((r.key_groups.tolist(), r.keys.to_pylist(), r.values.to_pylist(), inp.pos))
    return out[0], out[1], took


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_reads_the_same_walked_and_per_entry(shape: str) -> None:
    state, key, block, walks = SHAPES[shape]
    walked, per_entry, took = _both_ways(state, key, block)
    assert walked == per_entry
    assert took == walks
    assert len(per_entry[1]) > 0 and per_entry[3] == len(block)  # type: ignore[index]


# -- hostile blocks: the per-entry path's errors, work bounded by the bytes ------------------------

_VALUE = (_state("VALUE", LONG), STRING, lambda i: b"\x00" + _key(i) + _i64(i))
_LIST = (_state("LIST", _t("list", LONG)), STRING, lambda i: b"\x00" + _key(i) + _list(i))
_MAP = (_state("MAP", _t("map", STRING, LONG)), STRING, lambda i: b"\x00" + _key(i) + _map(i))


def _hostile() -> dict[str, tuple[StateMetaInfo, FlinkType, bytes]]:
    value_state, value_key, value_entry = _VALUE
    good = _block(value_entry)
    list_state, list_key, list_entry = _LIST
    map_state, map_key, map_entry = _MAP
    entries = [value_entry(i) for i in range(N)]
    return {
        "a count larger than the bytes": (value_state, value_key, _i32(2**31 - 1) + good[4:]),
        "a negative count": (value_state, value_key, _i32(-5) + good[4:]),
        "a count one more than the entries": (value_state, value_key, _i32(N + 1) + good[4:]),
        "truncated in a String": (value_state, value_key, good[:len(good) - 12]),
        "a String longer than the bytes": (value_state, value_key,
                                           _i32(N) + b"".join(entries[:-1]) + b"\x00" + b"\x7fabc"),
        "a LIST length larger than the bytes": (list_state, list_key, _block(
            lambda i: b"\x00" + _key(i) + (_i32(2**30) if i == N - 1 else _list(i)))),
        "a negative LIST length": (list_state, list_key, _block(
            lambda i: b"\x00" + _key(i) + (_i32(-1) if i == 4 else _list(i)))),
        "a MAP size larger than the bytes": (map_state, map_key, _block(
            lambda i: b"\x00" + _key(i) + (_i32(2**31 - 1) if i == 6 else _map(i)))),
        "a MAP truncated in its last value": (map_state, map_key, _block(map_entry)[:-3]),
        "a LIST of Strings longer than the bytes": (_state("LIST", _t("list", STRING)), LONG, _block(
            lambda i: b"\x00" + _i64(i) + _i32(3 if i == N - 1 else 1) + _key(i))),
    }


@pytest.mark.parametrize("case", sorted(_hostile()))
def test_hostile_blocks_give_the_per_entry_errors(case: str) -> None:
    state, key, block = _hostile()[case]
    walked, per_entry, took = _both_ways(state, key, block)
    assert not took
    assert walked == per_entry
    error_type, message, byte_range = per_entry  # type: ignore[misc]
    assert error_type is CorruptSavepointError and byte_range is not None and byte_range[0] >= 1000, message


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_damaged_blocks_read_the_same_walked_and_per_entry(shape: str) -> None:
    """Bytes changed, set to the values the walk keys on, or cut out, at seeded random places:
    rows or error, the walk and the per-entry path agree."""
    state, key, block, _ = SHAPES[shape]
    rng = random.Random(shape)
    for _ in range(40):
        damaged = bytearray(block)
        for _ in range(rng.choice((1, 2, 4))):
            at, how = rng.randrange(len(damaged)), rng.random()
            if how < 0.5:
                damaged[at] = rng.randrange(256)
            elif how < 0.8:
                damaged[at] = rng.choice((0, 1, 2, 0x7F, 0x80, 0xFF))
            else:
                del damaged[at:at + rng.randrange(1, 6)]
        walked, per_entry, _ = _both_ways(state, key, bytes(damaged))
        assert walked == per_entry, bytes(damaged).hex()
