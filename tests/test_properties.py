"""Property tests: random savepoints through parallelism chains p1 -> p2 -> p3.

Each step is a real shallow rescale on real files, and each step's restore plan
must lose and duplicate nothing of SPLIT state, give all UNION state to every
subtask, one full BROADCAST copy to each, and keyed state to its owner.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyref import Savepoint, SavepointWriter, assign_to_key_group, key_group_range, rescale
from pyref.redistribution import DistributionMode
from pyref.serializers import Int64, String

parallelism = st.integers(min_value=1, max_value=9)


@st.composite
def savepoints(draw):
    p1 = draw(parallelism)
    max_p = draw(st.sampled_from([9, 16, 128]))
    split_counts = [draw(st.integers(0, 6)) for _ in range(p1)]
    union_counts = [draw(st.integers(0, 3)) for _ in range(p1)]
    broadcast = draw(st.lists(st.integers(-5, 5), max_size=4))
    keys = draw(st.lists(st.text(max_size=6), max_size=40, unique=True))
    chain = draw(st.lists(parallelism, min_size=2, max_size=2))
    return p1, max_p, split_counts, union_counts, broadcast, keys, chain


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(savepoints(), st.sampled_from([0, 1 << 20]))
def test_parallelism_chains_preserve_state(case, inline_bytes):
    p1, max_p, split_counts, union_counts, broadcast, keys, chain = case
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"sp{i}" for i in range(3)]
        split_elements, union_elements = [], []
        with SavepointWriter(str(paths[0]), inline_bytes=inline_bytes, chunk_bytes=16) as w:
            op = w.add_operator("op", parallelism=p1, max_parallelism=max_p, key_serializer=String())
            split = op.list_state("split", Int64(), DistributionMode.SPLIT_DISTRIBUTE)
            union = op.list_state("union", Int64(), DistributionMode.UNION)
            bcast = op.list_state("bcast", Int64(), DistributionMode.BROADCAST)
            for sub in range(p1):
                values = [sub * 100 + i for i in range(split_counts[sub])]
                split.add(sub, values)
                split_elements += values
                values = [-(sub * 100 + i) - 1 for i in range(union_counts[sub])]
                union.add(sub, values)
                union_elements += values
                bcast.add(sub, broadcast)
            op.keyed_state("kv", Int64()).add(keys, list(range(len(keys))))
        previous = p1
        for step, p in enumerate(chain, start=1):
            rescale(paths[step - 1], paths[step], p)
            sp = Savepoint.open(paths[step])
            # Restoring a rescaled savepoint at its own parallelism is what that parallelism restores.
            subtasks = sp.restore_plan(p).subtasks("op")
            split_seen = Counter(x for s in subtasks for x in s.list_state("split"))
            assert split_seen == Counter(split_elements)
            if p != previous:  # at unchanged parallelism state stays where it is, even or not
                sizes = [sum(r.count for r in s.list_ranges("split")) for s in subtasks]
                assert max(sizes) - min(sizes) <= 1
            previous = p
            for s in subtasks:
                assert Counter(s.list_state("union")) == Counter(union_elements)
                assert list(s.list_state("bcast")) == broadcast
                for key, value in s.keyed_state("kv"):
                    assert assign_to_key_group(key, max_p) in key_group_range(max_p, p, s.index)
                    assert keys[value] == key
            assert sorted(k for s in subtasks for k, _ in s.keyed_state("kv")) == sorted(keys)
