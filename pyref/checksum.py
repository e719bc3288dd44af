"""CRC32C (Castagnoli), the checksum of manifests and chunks (spec/format.md §3)."""

from __future__ import annotations

import google_crc32c


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC32C of ``data`` as an unsigned 32-bit integer."""
    if not isinstance(data, bytes):
        # The C implementation takes read-only bytes only.
        data = bytes(data)
    return google_crc32c.value(data)
