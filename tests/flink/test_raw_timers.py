"""Timers RocksDB with heap timers wrote as raw keyed state (the committed 2.3.0 windows
checkpoint, tests/flink/data/checkpoints), damaged: every fault is a typed error naming the
stream and its bytes, found without reading past them."""

from __future__ import annotations

import pathlib
import struct

import pytest

from pyref.errors import CorruptSavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint
from pyref.flink.raw_timers import PROXY_MAGIC, read_raw_timers

from tests.flink.test_checkpoints import snapshot

CASE = "2.3.0-rocksdb-incremental-windows-heap-timers"
OPERATOR = "tumbling-reduce"


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, range, tuple[int, ...]]:
    """The operator's raw keyed stream, its key groups and their offsets."""
    with FlinkSavepoint.open(snapshot(CASE, tmp_path_factory.mktemp("raw"))) as sp:
        handle = sp.operator(OPERATOR).state.subtasks[0].raw_keyed_state
        buffer, start, end, _ = sp.store.open(handle.stream)
        return bytes(buffer[start:end]), handle.key_groups, handle.offsets


def _read(data: bytes, key_groups: range, offsets: tuple[int, ...]):
    return read_raw_timers(data, 0, len(data), 0, key_groups, offsets, "raw-stream", 1, OPERATOR)


def test_the_stream_is_one_proxy_per_key_group(raw) -> None:
    data, key_groups, offsets = raw
    assert offsets[0] == 0 and len(offsets) == len(key_groups) == 128
    assert all(data[o:o + 8] == PROXY_MAGIC + struct.pack(">i", 2) for o in offsets)
    timers = _read(data, key_groups, offsets)
    assert [s.name for s in timers.services] == ["window-timers"]
    assert [s.namespace_type.kind for s in timers.services] == ["time-window"]
    assert len(timers.states["_timer_state/event_window-timers"][1].keys) == 100
    assert len(timers.states["_timer_state/processing_window-timers"][1].keys) == 0


def test_meta_info_comes_from_the_first_key_group_alone(tmp_path: pathlib.Path) -> None:
    with FlinkSavepoint.open(snapshot(CASE, tmp_path)) as sp:
        op = sp.operator(OPERATOR)
        _, infos = op.keyed_meta()
        assert {"_timer_state/event_window-timers", "_timer_state/processing_window-timers"} <= set(infos)
        assert not op.has_raw_state  # raw keyed state, but timers: an import carries them


def test_a_truncated_key_group_names_its_bytes(raw) -> None:
    data, key_groups, offsets = raw
    cut = offsets[6] - 3  # inside the last timer of key group 5
    with pytest.raises(CorruptSavepointError, match="truncated") as err:
        _read(data[:cut], key_groups[:6], offsets[:6])
    assert err.value.path == "raw-stream" and err.value.byte_range[1] > cut


def test_bytes_after_a_key_groups_timers_are_corrupt(raw) -> None:
    data, key_groups, offsets = raw
    with pytest.raises(CorruptSavepointError, match="2 bytes after the timers of key group 127"):
        _read(data + b"\x00\x00", key_groups, offsets)


def test_an_impossible_timer_count_is_refused_before_anything_is_read(raw) -> None:
    data, key_groups, offsets = raw
    timers = _read(data, key_groups, offsets)
    header = 8 + 4 + 2 + len("window-timers")
    key_snapshot = len(timers.services[0].key_type.snapshot) + len(timers.services[0].namespace_type.snapshot)
    count_at = header + key_snapshot
    damaged = data[:count_at] + struct.pack(">i", 1 << 30) + data[count_at + 4:]
    with pytest.raises(CorruptSavepointError, match="impossible") as err:
        _read(damaged, key_groups, offsets)
    assert err.value.byte_range == (count_at, count_at + 4)


def test_another_proxy_version_is_unsupported(raw) -> None:
    data, key_groups, offsets = raw
    with pytest.raises(UnsupportedFormatError, match="version 1") as err:
        _read(PROXY_MAGIC + struct.pack(">i", 1) + data[8:], key_groups, offsets)
    assert err.value.byte_range == (4, 8)


def test_a_key_group_without_the_magic_is_a_users_raw_state(raw) -> None:
    data, key_groups, offsets = raw
    at = offsets[3]
    with pytest.raises(UnsupportedFormatError, match="not Flink's timers.*key group 3") as err:
        _read(data[:at] + b"\x00" + data[at + 1:], key_groups, offsets)
    assert err.value.byte_range == (at, at + 4)


def test_every_key_group_names_the_same_services(raw) -> None:
    data, key_groups, offsets = raw
    at = offsets[1] + 8  # key group 1's service count
    with pytest.raises(CorruptSavepointError, match="key group 1 has 0 timer services, key group 0 1") as err:
        _read(data[:at] + struct.pack(">i", 0) + data[at + 4:offsets[2]], key_groups[:2], offsets[:2])
    assert err.value.byte_range == (at, at + 4)
