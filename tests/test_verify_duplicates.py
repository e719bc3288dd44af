"""verify reports keyed rows that repeat a key (allowed by the format, the last wins, but a
writer should not store them: spec/format.md §7.1)."""

from __future__ import annotations

from pyref import Savepoint, SavepointWriter
from pyref.inspection import verify
from pyref.key_groups import assign_to_key_group
from pyref.serializers import Int32, String


def test_verify_reports_keys_stored_in_more_than_one_row(tmp_path):
    with SavepointWriter(str(tmp_path / "dup")) as w:
        state = w.add_operator("op", parallelism=2, key_serializer=String()).keyed_state("s", Int32())
        state.add(["a", "b", "a", "c"], [1, 2, 3, 4])
        w.add_operator("ok", parallelism=2, key_serializer=String()).keyed_state("m", Int32(), kind="map",
                                                                                user_key_serializer=String()).add(
            ["a", "a"], [1, 2], ["x", "y"])
    report = verify(Savepoint.open(tmp_path / "dup"))
    assert report.ok
    assert [w for w in report.warnings if "more than one row" in w] == [
        f"op/s: 1 keys are stored in more than one row (e.g. encoded key {String().encode('a').hex()} in key "
        f"group {assign_to_key_group('a', 128, 'string')}, 2 rows); readers take the last in state order "
        "(spec/format.md §7.1)"]


def test_repeats_are_counted_per_key_group_across_its_chunks(tmp_path):
    """Identities are counted a key group at a time, over all the key group's chunks: a key
    repeated in two chunks of its key group counts, as do repeats in other key groups; keys
    stored once do not, however many rows their key group has."""
    keys = [f"k{i}" for i in range(300)]
    with SavepointWriter(str(tmp_path / "sp"), chunk_bytes=64, buffer_bytes=64) as w:
        state = w.add_operator("op", parallelism=2, max_parallelism=4, key_serializer=String()).keyed_state(
            "s", Int32())
        state.add(keys, list(range(300)))
        state.add(["k7", "k150", "k7"], [1, 2, 3])
    sp = Savepoint.open(tmp_path / "sp")
    chunks = sp.manifest.operators[0].keyed_states[0].chunks
    assert len(chunks) > 4  # key groups split over several chunks
    [warning] = [w for w in verify(sp).warnings if "more than one row" in w]
    assert warning.startswith("op/s: 2 keys are stored in more than one row")
