"""A writer process to be killed mid-upload: ``python object_store_writer.py URL GENERATION``.

Writes generation GENERATION of a savepoint over URL (overwrite=True): one keyed state
of incompressible values in data files of 24 MiB, so that each is a multipart upload
of several parts. Prints "ready" once imported and "committed" after the commit.
"""

from __future__ import annotations

import sys

import numpy as np

from pyref import SavepointWriter
from pyref.serializers import Bytes, Int64

ENTRIES = 4096
VALUE_BYTES = 16 << 10


def value(generation: int, key: int) -> bytes:
    return np.random.default_rng([generation, key]).bytes(VALUE_BYTES)


def write_generation(url: str, generation: int, keys: range = range(ENTRIES)) -> None:
    with SavepointWriter(url, overwrite=True, codec="none", file_bytes=24 << 20, inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=64, key_serializer=Int64())
        op.keyed_state("blob", Bytes()).add(list(keys), [value(generation, k) for k in keys])


if __name__ == "__main__":
    print("ready", flush=True)
    write_generation(sys.argv[1], int(sys.argv[2]))
    print("committed", flush=True)
