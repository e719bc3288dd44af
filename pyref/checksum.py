"""CRC32C (Castagnoli), the checksum of manifests and chunks (spec/format.md §3)."""

from __future__ import annotations

import google_crc32c

#: Views are checksummed in pieces of this size: the C implementation takes read-only
#: bytes only, and copying a whole manifest-sized view would double its memory.
_PIECE = 8 << 20


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC32C of ``data`` as an unsigned 32-bit integer."""
    if isinstance(data, bytes):
        return google_crc32c.value(data)
    view = memoryview(data).cast("B")
    crc = 0
    for start in range(0, len(view), _PIECE):
        crc = google_crc32c.extend(crc, bytes(view[start:start + _PIECE]))
    return crc
