"""The writer against a plain-Python model: whatever the adds (many small ones, empty
ones, rows bigger than a chunk or than the buffer), the budget and the number of slots
(flush rounds, merges of small adds, spills), every row comes back exactly once, each
key group's (list partition's) rows in the order they were added, and every chunk
keeps the payload rules (spec/format.md §7, §7.1, §7.2)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyref import Savepoint, SavepointWriter, writer
from pyref.codecs import MAX_RAW_LENGTH
from pyref.errors import InvalidArgumentError
from pyref.serializers import Bytes, Int64, TimeWindow
from pyref.ttl import TtlConfig

#: One add: (key group, value size) per row; sizes reach past the chunk and the buffer.
_rows = st.lists(st.tuples(st.sampled_from([0, 1, 2, 64, 127]), st.sampled_from([0, 1, 7, 100, 3000, 20_000])),
                max_size=60)
_adds = st.lists(_rows, min_size=1, max_size=25)
_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])
#: The most bytes one buffered column may hold, as the writer sees it: the real limit (int32
#: offsets, 2 GiB), or one small enough that merges of buffered adds and sorted key groups
#: outgrow it in these tests (a real one takes more than 2 GiB: test_large_buffers_*).
_column_limits = st.sampled_from([writer.MAX_COLUMN_BYTES, 5000])


def _check_chunks(sp: Savepoint, chunks, columns: int, chunk_bytes: int) -> None:
    """Payload rules P1-P6 and C4, and chunks cut at the chunk size (a single row may exceed it)."""
    for chunk in chunks:
        assert chunk.row_count > 0, "a chunk without rows"
        assert 8 + 4 * columns * (chunk.row_count + 1) <= chunk.raw_length <= MAX_RAW_LENGTH
        sp.store.read_columns(chunk, columns, "op/v")  # decodes and checks P1-P6
        if chunk.row_count > 1:  # rows cost their cells and offsets; the header and first offsets come on top
            assert chunk.raw_length <= chunk_bytes + 8 + 4 * columns


@_SETTINGS
@given(_adds, st.sampled_from([(1 << 12, 1 << 14), (1 << 12, 1 << 16), (1 << 14, 1 << 20)]),
       st.sampled_from([128, 32768]), st.booleans(), _column_limits)
def test_keyed_rows_come_back_once_each_in_the_order_they_were_added(tmp_path_factory, monkeypatch, adds, sizes,
                                                                     max_parallelism, sort_keys, column_limit):
    chunk_bytes, buffer_bytes = sizes
    monkeypatch.setattr(writer, "MAX_COLUMN_BYTES", column_limit)
    path = tmp_path_factory.mktemp("sp") / "sp"
    expected: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    serial = 0
    with SavepointWriter(str(path), chunk_bytes=chunk_bytes, buffer_bytes=buffer_bytes, sort_keys=sort_keys) as w:
        op = w.add_operator("op", 1, max_parallelism=max_parallelism, key_serializer=Int64(), key_groups="writer")
        state = op.keyed_state("v", Bytes())
        for rows in adds:
            # The key names the row's group and a serial number, so that sorting by key keeps add order.
            keys = [group * 1_000_000 + serial + i for i, (group, _) in enumerate(rows)]
            values = [bytes([key % 251]) * size for key, (_, size) in zip(keys, rows)]
            groups = [g * (max_parallelism // 128) for g, _ in rows]
            state.add(keys, values, key_groups=groups)
            for key, value, group in zip(keys, values, groups):
                expected[group].append((key, value))
            serial += len(rows)
    sp = Savepoint.open(path)
    view = sp.operator("op").keyed_state("v")
    table = view.to_arrow()
    got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for group, key, value in zip(*(table.column(n).to_pylist() for n in ("key_group", "key", "value"))):
        got[group].append((key, value))
    # sort_keys orders each flush's rows of a key group by encoded key (keys are distinct here).
    assert {g: sorted(r) for g, r in got.items()} == {g: sorted(r) for g, r in expected.items()}
    if not sort_keys:
        assert dict(got) == dict(expected)
    chunks = view.proto.chunks
    assert [c.key_group for c in chunks] == sorted(c.key_group for c in chunks)
    _check_chunks(sp, chunks, 2, chunk_bytes)


@_SETTINGS
@given(_adds, st.sampled_from([(1 << 12, 1 << 14), (1 << 14, 1 << 20)]), st.booleans(), _column_limits)
def test_last_add_of_a_key_wins_across_flush_rounds_and_files(tmp_path_factory, monkeypatch, adds, sizes, sort_keys,
                                                              column_limit):
    """Every add writes the same few keys again: the value read is the last one added, also
    when rounds, spills and small data files spread a key's rows over many chunks, and when
    each flush sorts a key group's rows by key (stably, §7.6)."""
    chunk_bytes, buffer_bytes = sizes
    monkeypatch.setattr(writer, "MAX_COLUMN_BYTES", column_limit)
    path = tmp_path_factory.mktemp("sp") / "sp"
    last: dict[int, bytes] = {}
    with SavepointWriter(str(path), chunk_bytes=chunk_bytes, buffer_bytes=buffer_bytes, file_bytes=1 << 15,
                         inline_bytes=64, sort_keys=sort_keys) as w:
        state = w.add_operator("op", 2, max_parallelism=128, key_serializer=Int64()).keyed_state("v", Bytes())
        for n, rows in enumerate(adds):
            keys = [group % 9 for group, _ in rows]
            values = [f"{n}.{i}:".encode() + bytes(size) for i, (_, size) in enumerate(rows)]
            state.add(keys, values)
            last.update(zip(keys, values))
    view = Savepoint.open(path).operator("op").keyed_state("v")
    assert {k: view.get(k) for k in range(9)} == {k: last.get(k) for k in range(9)}
    assert {k: v for k, v in view.items()} == last  # items: state order, the last row of a key last


@_SETTINGS
@given(st.lists(st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0, 1, 50, 5000])), max_size=40),
                min_size=1, max_size=25),
       st.sampled_from([(1 << 12, 1 << 14), (1 << 14, 1 << 20)]), _column_limits)
def test_list_partitions_keep_every_element_in_the_order_added(tmp_path_factory, monkeypatch, adds, sizes,
                                                               column_limit):
    chunk_bytes, buffer_bytes = sizes
    monkeypatch.setattr(writer, "MAX_COLUMN_BYTES", column_limit)
    path = tmp_path_factory.mktemp("sp") / "sp"
    expected: dict[int, list[bytes]] = defaultdict(list)
    with SavepointWriter(str(path), chunk_bytes=chunk_bytes, buffer_bytes=buffer_bytes) as w:
        state = w.add_operator("op", 5).list_state("l", Bytes())
        for n, rows in enumerate(adds):
            for subtask in range(5):
                elements = [f"{n}.{i}:".encode() + bytes(size) for i, (s, size) in enumerate(rows) if s == subtask]
                state.add(subtask, elements)
                expected[subtask] += elements
    view = Savepoint.open(path).operator("op").list_state("l")
    assert {s: list(view.partition(s)) for s in range(5)} == {s: expected[s] for s in range(5)}


def test_an_empty_add_writes_nothing_and_breaks_nothing(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", 1, max_parallelism=128, key_serializer=Int64())
        state = op.keyed_state("v", Bytes())
        state.add([], [])
        state.add(pa.array([], pa.int64()), pa.array([], pa.binary()))
        state.add([1], [b"x"])
        state.add([], [])
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("v")
    assert list(view.items()) == [(1, b"x")]
    assert all(c.row_count for c in view.proto.chunks)



def test_rows_of_empty_cells_are_still_cut_into_chunks_of_the_chunk_size(tmp_path):
    """Cells of 0 bytes still cost their offsets (8 bytes a row of 2 columns): a key group of
    many such rows makes many chunks, not one payload that grows without bound (§7)."""
    rows = 20_000
    with SavepointWriter(str(tmp_path / "sp"), chunk_bytes=4096, buffer_bytes=1 << 20) as w:
        op = w.add_operator("op", 1, max_parallelism=128, key_serializer=Bytes(), key_groups="writer")
        op.keyed_state("v", Bytes()).add([b""] * rows, [b""] * rows, key_groups=np.zeros(rows, np.int64))
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("v")
    assert sum(c.row_count for c in view.proto.chunks) == rows
    assert max(c.raw_length for c in view.proto.chunks) <= 2 * 4096


def test_a_chunk_size_past_the_payload_limit_still_cuts_payloads_under_2_gib():
    """chunk_bytes has no upper bound: rows are still cut so that every payload of more than
    one row, its header and offsets included, stays within 2^31 - 1 bytes (§7, C4)."""
    from pyref.writer import _chunk_target, _split_rows

    columns = 2
    sizes = np.array([700 << 20, 700 << 20, 700 << 20, 3, 5], dtype=np.int64)  # cells of each row
    for first, stop in _split_rows(sizes + 4 * columns, _chunk_target(1 << 40, columns)):
        payload = 8 + 4 * columns * (stop - first + 1) + int(sizes[first:stop].sum())
        assert stop - first == 1 or payload <= MAX_RAW_LENGTH


@pytest.mark.parametrize("state", ["keyed", "list", "broadcast"])
def test_a_null_encoded_cell_is_refused_not_stored_as_empty_bytes(tmp_path, state):
    """Buffering copies a column's offsets and bytes: a null cell of an already ordered add
    came back as b"" (a value nobody wrote). It is refused, and the writer stays usable."""
    cells = pa.array([b"abcd", None], pa.binary())
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", 1, max_parallelism=128, key_serializer=Int64(), key_groups="writer")
        keys = pa.array([Int64().encode(1), Int64().encode(2)], pa.binary())
        if state == "keyed":
            target = op.keyed_state("v", Bytes())
            with pytest.raises(InvalidArgumentError, match="null"):
                target.add_encoded([keys, cells], np.array([0, 0]))
        elif state == "list":
            target = op.list_state("v", Bytes())
            with pytest.raises(InvalidArgumentError, match="null"):
                target.add_encoded(0, cells)
        else:
            target = op.broadcast_state("v", Bytes(), Bytes())
            with pytest.raises(InvalidArgumentError, match="null"):
                target.add_encoded(0, keys, cells)
    assert w.status == "committed"


@_SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["map", "list", "timers"]),
                          st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.sampled_from([0, 9, 2000])),
                                   max_size=30)),
                min_size=1, max_size=30),
       st.sampled_from([(1 << 11, 1 << 13), (1 << 14, 1 << 20)]), st.sampled_from([16, 32768]))
def test_map_list_and_timer_states_sharing_one_budget_read_back_as_the_model(tmp_path_factory, adds, sizes,
                                                                            max_parallelism):
    """Namespaced TTL MAP and LIST states and a timer service of one operator take turns in
    one budget (rounds of one state relieve another's adds): each (key, namespace, user key)
    reads back its last value and timestamp, each list its last whole list, each timer once."""
    chunk_bytes, buffer_bytes = sizes
    path = tmp_path_factory.mktemp("sp") / "sp"
    windows = [(0, 10), (10, 20)]
    maps: dict[tuple, tuple[bytes, int]] = {}
    lists: dict[tuple, list[bytes]] = {}
    timers: set[tuple] = set()
    with SavepointWriter(str(path), chunk_bytes=chunk_bytes, buffer_bytes=buffer_bytes) as w:
        op = w.add_operator("op", 2, max_parallelism=max_parallelism, key_serializer=Int64())
        m = op.keyed_state("m", Bytes(), kind="map", user_key_serializer=Int64(), namespace_serializer=TimeWindow(),
                           ttl=TtlConfig(1000))
        lst = op.keyed_state("l", Bytes(), kind="list", namespace_serializer=TimeWindow(), ttl=TtlConfig(1000))
        t = op.timer_service("t", "event_time")
        for n, (part, rows) in enumerate(adds):
            keys = [k for k, _, _ in rows]
            spaces = [windows[u % 2] for _, u, _ in rows]
            if part == "map":
                values = [f"{n}.{i}".encode() + bytes(size) for i, (_, _, size) in enumerate(rows)]
                m.add(keys, values, [u for _, u, _ in rows], namespaces=spaces, ttl_timestamps=[n] * len(rows))
                maps.update(((k, s, u), (v, n)) for (k, u, _), s, v in zip(rows, spaces, values))
            elif part == "list":
                values = [[f"{n}.{i}".encode(), bytes(size)] for i, (_, _, size) in enumerate(rows)]
                lst.add(keys, values, namespaces=spaces, ttl_timestamps=[n] * len(rows))
                lists.update(((k, s), v) for k, s, v in zip(keys, spaces, values))
            else:
                t.add(keys, [n * 10 + u for _, u, _ in rows])
                timers.update((k, n * 10 + u) for k, u, _ in rows)
    operator = Savepoint.open(path).operator("op")
    assert {(k, tuple(s), u): (v, ts) for k, s, u, v, ts in operator.keyed_state("m").items(with_ttl=True)} == maps
    got_lists = {}
    for k, s, v in operator.keyed_state("l").items():
        got_lists[k, tuple(s)] = v  # state order: the last row of a (key, namespace) last
    assert got_lists == lists
    assert set(operator.timer_service("t").timers()) == timers


def test_chunks_compressed_on_worker_threads_keep_their_order_and_bytes(tmp_path):
    """Payloads of 64 KiB and more are compressed on worker threads while smaller ones are
    stored at once: every chunk still points at its own bytes, a key group's in add order."""
    rng = np.random.default_rng(1)
    expected = []
    with SavepointWriter(str(tmp_path / "sp"), chunk_bytes=1 << 17, buffer_bytes=1 << 18, file_bytes=1 << 19) as w:
        state = w.add_operator("op", 1, max_parallelism=4, key_serializer=Int64(), key_groups="writer").keyed_state(
            "v", Bytes())
        for n in range(60):
            size = int(rng.choice([10, 5000, 70_000]))
            value = rng.bytes(size)  # incompressible: stored in the data files, not inline
            state.add([n], [value], key_groups=[0])
            expected.append((n, value))
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("v")
    assert list(view.items()) == expected


@pytest.mark.parametrize("prefix", ["job/", "a:b", "a\\b", "nul\x00"])
def test_a_file_prefix_that_would_leave_data_or_make_an_unsafe_path_is_refused_up_front(tmp_path, prefix):
    """Data files are data/<name>.svd (§6.2): "job/" put them in data/job/, where neither the
    deletion of replaced files (§10.3) nor a cleanup ever looks; ':' failed the write midway."""
    with pytest.raises(InvalidArgumentError, match="file_prefix"):
        SavepointWriter(str(tmp_path / "sp"), file_prefix=prefix)
    assert not (tmp_path / "sp").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sort_keys", [False, True])
def test_large_buffers_hold_more_than_2_gib_of_a_state(tmp_path, sort_keys):
    """A budget above 2 GiB lets one state buffer more cell bytes than a binary column's int32
    offsets hold: merging its many small adds (and, with sort_keys, sorting a key group of more
    than 2 GiB) failed with pyarrow's offset overflow. Needs about 10 GB of memory."""
    value_bytes, rows, adds = 64 << 10, 800, 48  # 48 adds of 50 MiB: 2.4 GiB, each key group < 1 MiB
    blob = pa.py_buffer(np.random.default_rng(0).bytes(value_bytes * rows))
    values = pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(np.arange(rows + 1, dtype=np.int32)
                                                                          * value_bytes), blob])
    # sort_keys: one key group, and a chunk size past it, so that one flush sorts all of it.
    layout = dict(chunk_bytes=3 << 30, max_parallelism=1) if sort_keys else dict(chunk_bytes=1 << 20,
                                                                                  max_parallelism=4096)
    with SavepointWriter(str(tmp_path / "sp"), codec="none", buffer_bytes=4 << 30, chunk_bytes=layout["chunk_bytes"],
                         sort_keys=sort_keys) as w:
        op = w.add_operator("op", 1, max_parallelism=layout["max_parallelism"], key_serializer=Int64())
        state = op.keyed_state("v", Bytes())
        for a in range(adds):
            state.add(pa.array(np.arange(a * rows, (a + 1) * rows)), values)
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("v")
    assert sum(c.row_count for c in view.proto.chunks) == rows * adds
    assert [view.get(k) == values[k % rows].as_py() for k in (0, rows * adds - 1, 12345)] == [True] * 3
