"""Bounded, order-preserving parallelism for chunk work.

Decompression, compression and CRC32C run in C with the GIL released, so
threads give real speed-ups on chunk-sized work. At most ``prefetch`` results
wait at any time, which keeps memory bounded by a few chunks.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Worker threads for chunk work; 1 disables threading.
WORKERS = max(1, min(8, os.cpu_count() or 1))

#: Worker threads that decompress and parse chunks for a reader. One core stays with the
#: thread that consumes them (checks keys, decodes cells): on two cores a second decoding
#: thread only contends with it, and costs more CPU than it saves (page faults of buffers
#: freed across threads, GIL hand-offs).
DECODE_WORKERS = max(1, min(8, (os.cpu_count() or 1) - 1))


def ordered_map(fn: Callable[[T], R], items: Iterable[T], *, workers: int = WORKERS,
                prefetch: int | None = None) -> Iterator[R]:
    """``map(fn, items)`` computed by ``workers`` threads, yielded in order."""
    if workers <= 1:
        yield from map(fn, items)
        return
    limit = prefetch or 2 * workers
    with ThreadPoolExecutor(workers, thread_name_prefix="pyref-chunk") as pool:
        pending: deque[Future[R]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= limit:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
