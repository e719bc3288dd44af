"""Shared fixtures: small savepoints written with the real writer on real files."""

from __future__ import annotations

import pytest

from pyref import SavepointWriter
from pyref.redistribution import DistributionMode
from pyref.serializers import Int64, String


def write_seeds(path, *, parallelism: int = 2, **writer_options) -> None:
    """The seeds' scenario: a Kafka source with 4 partition offsets at parallelism 2
    and a per-URL count as keyed state."""
    with SavepointWriter(str(path), **writer_options) as w:
        source = w.add_operator("kafka-source", parallelism=parallelism)
        offsets = source.list_state("offsets", Int64(), DistributionMode.SPLIT_DISTRIBUTE)
        offsets.add(0, [100, 101])
        offsets.add(1, [200, 201])
        counter = w.add_operator("url-counter", parallelism=parallelism, key_serializer=String())
        counts = counter.keyed_state("count", Int64())
        urls = [f"/page/{i}" for i in range(50)]
        counts.add(urls, list(range(50)))


@pytest.fixture
def seeds(tmp_path):
    path = tmp_path / "seeds"
    write_seeds(path)
    return path
