"""Java ``DataOutput`` as Flink writes it: big-endian integers, ``writeUTF``'s
modified UTF-8 behind a 16-bit length, and Flink's ``StringValue`` strings.

The inverse of :mod:`pyref.flink.datainput`. Building blocks return ``bytes``;
:class:`DataOutput` appends them to one buffer.
"""

from __future__ import annotations

import builtins
import struct

from ..errors import InvalidArgumentError

__all__ = ["DataOutput", "modified_utf8", "utf", "string_value", "varint"]

_MAX_UTF = 0xFFFF
#: Each Java integer type: its big-endian packer and its name.
_SHORT, _INT, _LONG = ((struct.Struct(f">{code}"), java) for code, java in (("h", "short"), ("i", "int"),
                                                                           ("q", "long")))


def modified_utf8(text: str) -> bytes:
    """Java's modified UTF-8: NUL as ``C0 80``, a character beyond U+FFFF as its
    two UTF-16 surrogates of three bytes each (CESU-8), anything else as UTF-8."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    # Split astral characters into surrogates (Python strings may hold lone ones), then
    # let surrogatepass write each surrogate as three bytes.
    split = "".join(c if ord(c) <= 0xFFFF else _surrogates(ord(c)) for c in text)
    return split.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")


def _surrogates(code_point: int) -> str:
    v = code_point - 0x10000
    return chr(0xD800 + (v >> 10)) + chr(0xDC00 + (v & 0x3FF))


def utf(text: str, what: str = "string") -> bytes:
    """``DataOutput.writeUTF``: the length of the modified UTF-8 bytes (u16), then them;
    Java refuses more than 65535 bytes, so do we (naming ``what``)."""
    raw = modified_utf8(text)
    if len(raw) > _MAX_UTF:
        raise InvalidArgumentError(f"{what} {text[:40]!r}... is {len(raw)} bytes in modified UTF-8; Flink writes "
                                   f"at most {_MAX_UTF} (DataOutput.writeUTF)")
    return struct.pack(">H", len(raw)) + raw


def varint(value: int) -> bytes:
    """A non-negative int as 7-bit groups, least significant first, the top bit set on
    every byte but the last."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string_value(text: str | None) -> bytes:
    """``StringValue.writeString`` (Flink's ``StringSerializer``): the length + 1 as a
    7-bit varint, least significant group first (0 = null), then every UTF-16 code
    unit as such a varint."""
    if text is None:
        return b"\x00"
    if text.isascii():
        return varint(len(text) + 1) + text.encode("ascii")
    raw = text.encode("utf-16-le", "surrogatepass")
    units = struct.unpack(f"<{len(raw) // 2}H", raw)
    return varint(len(units) + 1) + b"".join(varint(u) for u in units)


class DataOutput:
    """Appends Java ``DataOutput`` values to one buffer."""

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = bytearray()

    def __len__(self) -> int:
        return len(self.buffer)

    def raw(self, data: bytes | bytearray | memoryview) -> DataOutput:
        self.buffer += data
        return self

    def byte(self, value: int) -> DataOutput:
        self.buffer.append(value & 0xFF)
        return self

    def boolean(self, value: bool) -> DataOutput:
        return self.byte(1 if value else 0)

    def short(self, value: int) -> DataOutput:
        return self._fixed(_SHORT, value)

    def int(self, value: int) -> DataOutput:
        return self._fixed(_INT, value)

    # ``int`` below is the method above, so the builtin is spelled out from here on.
    def long(self, value: builtins.int) -> DataOutput:
        return self._fixed(_LONG, value)

    def _fixed(self, fmt: tuple[struct.Struct, str], value: builtins.int) -> DataOutput:
        """A Java ``short``/``int``/``long``: a value out of its range is the caller's, refused
        by name (a position a user gave, say), not a ``struct.error``."""
        packer, java = fmt
        try:
            self.buffer += packer.pack(value)
        except struct.error:
            bits = 8 * packer.size
            raise InvalidArgumentError(f"{value!r} does not fit a Java {java} ({-(1 << (bits - 1))} to "
                                       f"{(1 << (bits - 1)) - 1})") from None
        return self

    def utf(self, text: str, what: str = "string") -> DataOutput:
        self.buffer += utf(text, what)
        return self

    def getvalue(self) -> bytes:
        return bytes(self.buffer)
