"""Java ``DataInput`` as Flink writes it: big-endian integers, modified UTF-8
(``writeUTF``) and Flink's own ``StringValue`` string encoding.

Every read is bounds-checked before anything is allocated, so a hostile
length prefix costs an error, never memory: a failed read raises
:class:`~pyref.errors.CorruptSavepointError` naming the file and the absolute
byte range that was wanted.
"""

from __future__ import annotations

import mmap
import struct

from ..errors import CorruptSavepointError

__all__ = ["DataInput", "decode_modified_utf8", "decode_utf16_units"]

_SHORT = struct.Struct(">h")
_USHORT = struct.Struct(">H")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_FLOAT = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")


def decode_utf16_units(units: list[int]) -> str:
    """A Java ``String`` from its UTF-16 code units (lone surrogates kept as is)."""
    raw = b"".join(u.to_bytes(2, "little") for u in units)
    return raw.decode("utf-16-le", "surrogatepass")


def decode_modified_utf8(data: bytes) -> str:
    """Java's modified UTF-8: NUL is ``C0 80`` and a supplementary character is
    two 3-byte surrogates; plain UTF-8 otherwise."""
    if b"\xc0\x80" not in data and b"\xed" not in data:
        return data.decode("utf-8")
    text = data.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    # Re-pair surrogates that Java wrote as two 3-byte sequences.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


class DataInput:
    """A cursor over ``data[pos:end]``; ``base`` is the file offset of ``data[0]``
    so that errors name absolute byte ranges of ``path``."""

    __slots__ = ("data", "pos", "end", "base", "path", "state", "scan_budget")

    def __init__(self, data: bytes | memoryview | mmap.mmap, pos: int = 0, end: int | None = None, *,
                 base: int = 0, path: str | None = None, state: str | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end
        self.base = base
        self.path = path
        self.state = state
        #: Positions a search for the end of opaque data may still try (see serializers).
        self.scan_budget = 4 << 20

    # -- errors -----------------------------------------------------------

    def corrupt(self, reason: str, start: int | None = None, length: int = 0) -> CorruptSavepointError:
        """A typed error at ``start`` (default: the cursor) of ``length`` bytes."""
        start = self.pos if start is None else start
        return CorruptSavepointError(reason, path=self.path, state=self.state,
                                     byte_range=(self.base + start, self.base + start + length))

    def need(self, n: int, what: str) -> int:
        """Check that ``n`` bytes remain; return the current position."""
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise self.corrupt(f"truncated: {what} needs {n} bytes, {self.end - pos} remain", pos, max(n, 0))
        return pos

    # -- fixed width ------------------------------------------------------

    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def skip(self, n: int, what: str = "bytes") -> None:
        self.pos = self.need(n, what) + n

    def read_bytes(self, n: int, what: str = "bytes") -> bytes:
        pos = self.need(n, what)
        self.pos = pos + n
        return bytes(self.data[pos:pos + n])

    def read_ubyte(self, what: str = "byte") -> int:
        pos = self.need(1, what)
        self.pos = pos + 1
        return self.data[pos]

    def read_byte(self, what: str = "byte") -> int:
        b = self.read_ubyte(what)
        return b - 256 if b > 127 else b

    def read_bool(self, what: str = "boolean") -> bool:
        return self.read_ubyte(what) != 0

    def _unpack(self, fmt: struct.Struct, what: str):
        pos = self.need(fmt.size, what)
        self.pos = pos + fmt.size
        return fmt.unpack_from(self.data, pos)[0]

    def read_short(self, what: str = "short") -> int:
        return self._unpack(_SHORT, what)

    def read_ushort(self, what: str = "unsigned short") -> int:
        return self._unpack(_USHORT, what)

    def read_int(self, what: str = "int") -> int:
        return self._unpack(_INT, what)

    def read_long(self, what: str = "long") -> int:
        return self._unpack(_LONG, what)

    def read_float(self, what: str = "float") -> float:
        return self._unpack(_FLOAT, what)

    def read_double(self, what: str = "double") -> float:
        return self._unpack(_DOUBLE, what)

    def read_count(self, what: str, min_bytes_each: int = 1) -> int:
        """A non-negative int count of items that each take at least
        ``min_bytes_each`` bytes: refused before anything is allocated when
        the remaining bytes cannot hold that many."""
        start = self.pos
        n = self.read_int(what)
        if n < 0 or n * min_bytes_each > self.remaining():
            raise self.corrupt(f"{what} {n} is impossible with {self.remaining()} bytes left", start, 4)
        return n

    # -- strings ----------------------------------------------------------

    def read_utf(self, what: str = "string") -> str:
        """``DataOutput.writeUTF``: u16 byte length, then modified UTF-8."""
        n = self.read_ushort(what)
        pos = self.need(n, what)
        self.pos = pos + n
        raw = bytes(self.data[pos:pos + n])
        try:
            return decode_modified_utf8(raw)
        except UnicodeDecodeError:
            raise self.corrupt(f"{what} is not modified UTF-8", pos, n) from None

    def read_varint(self, what: str = "varint") -> int:
        """An unsigned int as 7-bit groups, least significant first, high bit
        set on every byte but the last (Flink's ``StringValue`` lengths/chars)."""
        start = self.pos
        result = shift = 0
        while True:
            b = self.read_ubyte(what)
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
            if shift > 28:
                raise self.corrupt(f"{what} is longer than 5 bytes", start, self.pos - start)

    def read_string_value(self, what: str = "string") -> str | None:
        """Flink's ``StringValue.writeString`` (StringSerializer): varint of
        length + 1 (0 = null), then each UTF-16 unit as a varint."""
        length = self.read_varint(what)
        if length == 0:
            return None
        n = length - 1
        pos = self.need(n, what)  # every char takes at least one byte
        chunk = self.data[pos:pos + n]
        if max(chunk, default=0) < 0x80:
            self.pos = pos + n
            return bytes(chunk).decode("ascii")
        units = [self.read_varint(what) for _ in range(n)]
        if any(u > 0xFFFF for u in units):
            raise self.corrupt(f"{what} has a character beyond 16 bits", pos, self.pos - pos)
        return decode_utf16_units(units)
