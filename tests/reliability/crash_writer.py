"""A writer process to be killed: ``python crash_writer.py PATH GENERATION ENTRIES [--kill-at CALL:N]``.

Writes generation GENERATION of a savepoint over PATH (overwrite=True), with many
small chunks over several data files so that a kill lands in every phase. Prints
"ready" once imported and "committed" after the commit. With ``--kill-at fsync:3``
the process SIGKILLs itself at the 3rd ``os.fsync`` call (likewise ``replace``,
``unlink``, ``write``, ``flock``): kills at exact points of the commit protocol.
With CRASH_WRITER_START_AT=<unix time> it waits for that instant before writing.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time

import numpy as np

from pyref import SavepointWriter
from pyref.serializers import Int64, String


def write_generation(path: str, generation: int, entries: int) -> None:
    with SavepointWriter(path, overwrite=True, inline_bytes=0, chunk_bytes=16 << 10, buffer_bytes=256 << 10,
                         file_bytes=256 << 10) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=128, key_serializer=Int64())
        keys = np.arange(entries, dtype=np.int64)
        op.keyed_state("values", Int64()).add(keys, keys + generation * 1_000_000_000)
        op.keyed_state("names", String()).add(keys[: entries // 4], [f"g{generation}-{i}" for i in range(entries // 4)])
        op.list_state("generation", Int64()).add(0, [generation] * 3)


def expected_sum(generation: int, entries: int) -> int:
    return entries * (entries - 1) // 2 + entries * generation * 1_000_000_000


def _arm(call: str, n: int) -> None:
    """SIGKILL this process at the n-th call of os.<call> (or fcntl.flock)."""
    module, name = (fcntl, "flock") if call == "flock" else (os, {"replace": "replace", "fsync": "fsync",
                                                                   "unlink": "unlink", "write": "write"}[call])
    original = getattr(module, name)
    count = [0]

    def hooked(*args, **kwargs):
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(module, name, hooked)


def main() -> None:
    path, generation, entries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if len(sys.argv) > 5 and sys.argv[4] == "--kill-at":
        call, n = sys.argv[5].split(":")
        _arm(call, int(n))
    print("ready", flush=True)
    start_at = float(os.environ.get("CRASH_WRITER_START_AT", "0"))
    while time.time() < start_at:  # a start line, for racing writers
        time.sleep(0.0005)
    write_generation(path, generation, entries)
    print("committed", flush=True)


if __name__ == "__main__":
    main()
