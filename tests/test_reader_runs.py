"""The reader's run-based key check (spec/format.md §7.1) against a plain-Python model.

The check decodes and hashes only the first key of each run of byte-equal key cells, and
hands the decoded keys on to the Arrow output (``CheckedKeys``). These tests make runs
straddle chunk boundaries, start after a chunk's first 64 rows or stop there, and check
that every way of reading gives the model's rows, and that a misplaced key or a key
outside the bounds is refused wherever it sits in its run."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyref import Savepoint, SavepointWriter
from pyref.errors import CorruptSavepointError
from pyref.key_groups import assign_to_key_group
from pyref.keys import as_key_array
from pyref.reader import KeyedStateView
from pyref.serializers import (Boolean, Bytes, Char, Float32, Int8, Int16, Int32, Int64, Serializer, String,
                               TimeWindow, Tuple)


def _examples(count: int) -> Any:
    """Hypothesis settings for ``count`` examples; each writes a savepoint, so few keep a test under 2 s."""
    return settings(max_examples=count, deadline=None, suppress_health_check=[HealthCheck.too_slow])


#: Key serializers and a few keys of each, chosen to repeat: non-ASCII and astral text, the
#: empty key, bytes of several widths, floats told apart by their bits, tuples.
KEYS: dict[str, tuple[Serializer, list[Any]]] = {
    "string": (String(), ["", "a", "é", "日本語", "\U0001F600", "\uffff", "ab"]),
    "bytes": (Bytes(), [b"", b"\x00", b"\xff", b"\x80\x00", b"abc", bytes(8), bytes(7) + b"\x01", bytes(16)]),
    # Keys of one width that differ only in their last byte: runs are found by comparing words.
    "bytes-8": (Bytes(), [bytes(7) + bytes([i]) for i in range(4)]),
    "bytes-24": (Bytes(), [bytes(23) + bytes([i]) for i in range(3)]),
    "string-16": (String(), [f"0123456789abcde{c}" for c in "xyz"]),
    "int32": (Int32(), [-1, 0, 1, 2**31 - 1]),
    "int64": (Int64(), [-1, 0, 1, 2**40]),
    "int8": (Int8(), [-128, 0, 1]),
    "int16": (Int16(), [-1, 0, 300]),
    "boolean": (Boolean(), [False, True]),
    "float32": (Float32(), [0.0, -0.0, 1.5, float("inf")]),
    "char": (Char(), ["a", "\ud800", "é", "\uffff"]),
    "tuple": (Tuple(String(), Int32()), [("", 0), ("é", 0), ("é", 1), ("x", -1)]),
    "named-tuple": (Tuple(Bytes(), Float32(), names=["b", "f"]), [(b"", 0.0), (b"\x01", 0.0), (b"\x01", -0.0)]),
}


def _runs(draw: Any, pool: list[Any], rows: int) -> list[Any]:
    """``rows`` keys: runs of one key, single keys, or single keys for the first 64 rows
    and runs after them (and the reverse), so that the 64-row sample decides either way."""
    pattern = draw(st.sampled_from(["runs", "distinct", "distinct-then-runs", "runs-then-distinct"]))
    keys: list[Any] = []
    while len(keys) < rows:
        repeat = {"runs": True, "distinct": False, "distinct-then-runs": len(keys) >= 64,
                  "runs-then-distinct": len(keys) < 64}[pattern]
        keys += [draw(st.sampled_from(pool))] * (draw(st.integers(1, 30)) if repeat else 1)
    return keys[:rows]


@st.composite
def key_columns(draw: Any) -> tuple[str, list[Any]]:
    name = draw(st.sampled_from(sorted(KEYS)))
    return name, _runs(draw, KEYS[name][1], draw(st.sampled_from([1, 2, 63, 64, 65, 129, 300])))


@pytest.fixture(scope="module")
def one_group_views(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyedStateView]:
    """A keyed state per key serializer, of max parallelism 1: every key is in key group 0."""
    views = {}
    for name, (serializer, pool) in KEYS.items():
        path = tmp_path_factory.mktemp(name) / "sp"
        with SavepointWriter(path) as w:
            op = w.add_operator("op", parallelism=1, max_parallelism=1, key_serializer=serializer)
            op.keyed_state("s", Int64()).add(pool[:1], [0])
        views[name] = Savepoint.open(path).operator("op").keyed_state("s")
    return views


@_examples(60)
@given(key_columns())
def test_checked_keys_equal_decoding_every_row(one_group_views: dict[str, KeyedStateView],
                                               column: tuple[str, list[Any]]) -> None:
    """The keys the check hands on are every row's decoded key: same Arrow type, same values
    bit for bit (encoded again, -0.0 stays -0.0), whether the chunk was checked by runs."""
    name, keys = column
    view, serializer = one_group_views[name], KEYS[name][0]
    (chunk,) = view.proto.chunks
    encoded = pa.array(serializer.encode_array(as_key_array(keys, serializer)).to_pylist(), pa.binary())
    checked = view._check_keys(chunk, encoded)
    assert checked is not None
    every_row, expected = checked.every_row(), serializer.decode_array(encoded)
    assert every_row.type == expected.type
    assert len(every_row) == len(keys)
    assert serializer.encode_array(every_row).to_pylist() == encoded.to_pylist()


MAX_PARALLELISM = 8
NAMES = [f"k{i}-é" for i in range(12)]


def _write(path: Path, keys: list[str], *, kind: str, chunk_bytes: int, key_bounds: bool,
           writer_groups: bool) -> tuple[list[tuple[int, int]], list[int], list[int], list[int]]:
    """A namespaced VALUE or MAP state of ``keys`` (added in two calls), and its namespaces,
    user keys, values and key groups."""
    n = len(keys)
    namespaces = [(10 * (i % 3), 10 * (i % 3) + 5) for i in range(n)]
    user_keys = [i % 2 for i in range(n)]
    values = list(range(n))
    # Writer-assigned groups need not be the hash: a key's group is its length's.
    groups = ([len(k) % MAX_PARALLELISM for k in keys] if writer_groups
              else [assign_to_key_group(k, MAX_PARALLELISM) for k in keys])
    with SavepointWriter(path, chunk_bytes=chunk_bytes, key_bounds=key_bounds) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=MAX_PARALLELISM, key_serializer=String(),
                            key_groups="writer" if writer_groups else "hashed")
        state = op.keyed_state("s", Int64(), kind=kind, user_key_serializer=Int32() if kind == "map" else None,
                               namespace_serializer=TimeWindow())
        half = n // 2
        for part in (slice(0, half), slice(half, n)):
            state.add(keys[part], values[part], *([user_keys[part]] if kind == "map" else []),
                      namespaces=namespaces[part], key_groups=groups[part] if writer_groups else None)
    return namespaces, user_keys, values, groups


@_examples(8)
@given(st.data(), st.sampled_from(["value", "map"]), st.sampled_from([48, 200, 1 << 20]), st.booleans(),
       st.booleans())
def test_every_read_agrees_with_the_model(data: Any, kind: str, chunk_bytes: int, key_bounds: bool,
                                          writer_groups: bool) -> None:
    """to_arrow (state order), items, scan_batches (storage order) and get (last row of an
    identity wins) give the model's rows, with runs cut by chunk boundaries."""
    keys = _runs(data.draw, NAMES, data.draw(st.integers(1, 150)))
    directory = Path(tempfile.mkdtemp())
    try:
        namespaces, user_keys, values, groups = _write(directory / "sp", keys, kind=kind, chunk_bytes=chunk_bytes,
                                                       key_bounds=key_bounds, writer_groups=writer_groups)
        view = Savepoint.open(directory / "sp").operator("op").keyed_state("s")
        order = sorted(range(len(keys)), key=lambda i: groups[i])  # stable: add order within a key group
        rows = [(groups[i], keys[i], {"start": namespaces[i][0], "end": namespaces[i][1]},
                 *([user_keys[i]] if kind == "map" else []), values[i]) for i in order]
        table = view.to_arrow()
        assert table.schema.field("key").type == pa.string()
        assert [tuple(r.values()) for r in table.to_pylist()] == rows
        scanned = pa.Table.from_batches(list(view.scan_batches()), schema=table.schema)
        assert sorted(map(repr, (tuple(r.values()) for r in scanned.to_pylist()))) == sorted(map(repr, rows))
        assert list(view.items()) == [(keys[i], namespaces[i], *([user_keys[i]] if kind == "map" else []), values[i])
                                      for i in order]
        latest: dict[tuple[str, tuple[int, int]], Any] = {}
        for i in order:
            identity = (keys[i], namespaces[i])
            if kind == "map":
                latest.setdefault(identity, {})[user_keys[i]] = values[i]
            else:
                latest[identity] = values[i]
        for (key, namespace), expected in latest.items():
            assert view.get(key, namespace=namespace) == expected
            if writer_groups:
                group = groups[keys.index(key)]
                assert view.get(key, namespace=namespace, key_group=group) == expected
        assert view.get("absent", namespace=(0, 5), **({"key_group": 0} if writer_groups else {})) is None
    finally:
        shutil.rmtree(directory)


HOME = NAMES[0]
HOME_GROUP = assign_to_key_group(HOME, MAX_PARALLELISM)
SAME_GROUP = [k for k in (f"h{i}-ü" for i in range(400)) if assign_to_key_group(k, MAX_PARALLELISM) == HOME_GROUP]
STRANGER = next(k for k in NAMES if assign_to_key_group(k, MAX_PARALLELISM) != HOME_GROUP)


@_examples(30)
@given(st.data(), st.sampled_from(["start", "inside", "end", "alone"]), st.sampled_from([120, 1 << 20]))
def test_a_misplaced_key_anywhere_in_a_run_is_reported_at_its_first_row(data: Any, where: str,
                                                                         chunk_bytes: int) -> None:
    """A run of another key group's key, placed at the start, inside or at the end of a run
    of the home key group, or as a single row, in a chunk of one key group that may be cut
    in several: every read refuses it, naming its first row in its chunk."""
    keys = _runs(data.draw, SAME_GROUP[:20], data.draw(st.integers(2, 150)))
    at = data.draw(st.integers(0, len(keys) - 1))
    length = 1 if where == "alone" else data.draw(st.integers(1, 5))
    if where == "start":
        keys[at:at] = [STRANGER] * length + [keys[at]] * 3
    elif where == "inside":
        keys[at:at] = [keys[at]] * 2 + [STRANGER] * length + [keys[at]] * 2
    elif where == "end":
        keys[at:at] = [keys[at]] * 3 + [STRANGER] * length
    else:
        keys[at:at] = [STRANGER]
    directory = Path(tempfile.mkdtemp())
    try:
        with SavepointWriter(directory / "sp", chunk_bytes=chunk_bytes) as w:
            op = w.add_operator("op", parallelism=1, max_parallelism=MAX_PARALLELISM, key_serializer=String())
            state = op.keyed_state("s", Int64(), namespace_serializer=TimeWindow())
            state.add_encoded([String().encode_array(keys), TimeWindow().encode_array([(i, i + 1) for i in
                                                                                       range(len(keys))]),
                               Int64().encode_array(list(range(len(keys))))], np.full(len(keys), HOME_GROUP))
        view = Savepoint.open(directory / "sp").operator("op").keyed_state("s")
        first = keys.index(STRANGER)
        start = 0
        for chunk in view.proto.chunks:  # the row within the chunk that holds it
            if first < start + chunk.row_count:
                break
            start += chunk.row_count
        expected = (f"row {first - start}: its key belongs to key group {assign_to_key_group(STRANGER, MAX_PARALLELISM)}"
                    f", not to the chunk's key group {HOME_GROUP}")
        for read in (view.to_arrow, lambda: list(view.items()), lambda: list(view.scan_batches())):
            with pytest.raises(CorruptSavepointError, match=expected):
                read()
    finally:
        shutil.rmtree(directory)


@pytest.mark.parametrize("writer_groups", [False, True])
@pytest.mark.parametrize("bound", ["min", "max"])
def test_a_run_outside_the_key_bounds_is_refused(tmp_path: Path, writer_groups: bool, bound: str) -> None:
    """Bounds are checked on the runs' first keys; a run whose key lies just outside them
    (the smallest or the largest key, in the middle of the chunk) is refused by every read,
    with writer-assigned key groups too, where no key is decoded for the key-group check."""
    keys = [k for k in SAME_GROUP[:6] for _ in range(20)]
    keys = keys[40:60] + keys[:40] + keys[60:]  # neither the smallest nor the largest key first or last
    path = tmp_path / "sp"
    with SavepointWriter(path, key_bounds=True) as w:
        op = w.add_operator("op", parallelism=1, max_parallelism=MAX_PARALLELISM, key_serializer=String(),
                            key_groups="writer" if writer_groups else "hashed")
        op.keyed_state("s", Int64(), namespace_serializer=TimeWindow()).add(
            keys, list(range(len(keys))), namespaces=[(i, i + 1) for i in range(len(keys))],
            key_groups=[HOME_GROUP] * len(keys) if writer_groups else None)
    savepoint = Savepoint.open(path)
    (chunk,) = savepoint.manifest.operators[0].keyed_states[0].chunks
    encoded = sorted({k.encode() for k in keys})
    assert (chunk.key_bounds.min, chunk.key_bounds.max) == (encoded[0], encoded[-1])
    assert savepoint.operator("op").keyed_state("s").to_arrow().column("key").to_pylist() == keys
    if bound == "min":
        chunk.key_bounds.min = encoded[1]
    else:
        chunk.key_bounds.max = encoded[-2]
    view = savepoint.operator("op").keyed_state("s")
    for read in (view.to_arrow, lambda: list(view.items()), lambda: list(view.scan_batches())):
        with pytest.raises(CorruptSavepointError, match="lies outside its key bounds"):
            read()
