"""Chunk compression codecs (spec/format.md §7.3).

zstd comes from pyarrow, which already carries it: no second compression
library to install, audit or keep in step.
"""

from __future__ import annotations

import enum
from typing import Any

import pyarrow as pa

from .errors import CorruptSavepointError, InvalidArgumentError, UnsupportedFormatError
from .zstd_frame import check_single_frame

#: Largest raw (uncompressed) chunk payload the format allows: chunk offsets are u32
#: and Arrow binary offsets are int32 (spec/format.md §7).
MAX_RAW_LENGTH = 2**31 - 1
#: Largest expansion a zstd frame can have: every block yields at most 128 KiB and
#: takes at least 4 stored bytes (an RLE block). A raw_length beyond this many times
#: the stored length is a lie; refusing it bounds the output buffer by the input
#: (spec/security.md).
MAX_ZSTD_RATIO = 32768


class Codec(enum.IntEnum):
    """Values equal the protobuf enum ``savepoint.v1.Codec``."""

    NONE = 0
    ZSTD = 1

    @classmethod
    def parse(cls, name: str | int | Codec) -> Codec:
        if isinstance(name, Codec):
            return name
        if isinstance(name, int) and not isinstance(name, bool) and name in cls._value2member_map_:
            return cls(name)
        if isinstance(name, str) and name.upper() in cls.__members__:
            return cls[name.upper()]
        raise InvalidArgumentError(f"unknown codec {name!r}; choose one of {[c.name.lower() for c in cls]}")


# Level 1 is Arrow's (and so Parquet's) default: on state-like data it compresses about as
# well as level 3 at several times the speed.
_ZSTD_LEVEL = 1


#: Compression must save at least this fraction of a payload to be kept (RocksDB's default
#: rule, 7/8): on data that barely shrinks, a raw chunk spares every read a decompression
#: and a copy of the whole payload for a few percent of space.
MIN_SAVING = 1 / 8


def pays(payload_length: int, stored_length: int) -> bool:
    """Whether compressing ``payload_length`` bytes into ``stored_length`` is worth keeping."""
    return stored_length <= payload_length * (1 - MIN_SAVING)


#: A payload of more than _SAMPLED_BYTES is first judged by compressing _SAMPLES slices of
#: _SAMPLE_BYTES spread over it; if they save less than half of MIN_SAVING, the payload is
#: kept raw without compressing it whole. State that is already compressed or encrypted
#: never pays, and compressing it cost a writer a third of its time.
_SAMPLES = 4
_SAMPLE_BYTES = 4096
_SAMPLED_BYTES = 16 * _SAMPLES * _SAMPLE_BYTES


def may_pay(codec: Codec, payload: bytes) -> bool:
    """Whether compressing ``payload`` may pass :func:`pays`, judged from slices of it.

    Deterministic (a function of the bytes only). Conservative: a payload judged not to pay
    saves less than MIN_SAVING / 2 in its slices; it could have paid only through repeats
    farther apart than a slice, or compressible parts that all fall between the slices (a
    size cost then, never a correctness one). Payloads of up to _SAMPLED_BYTES are always
    tried whole."""
    if codec == Codec.NONE or len(payload) <= _SAMPLED_BYTES:
        return True
    view, step = memoryview(payload), len(payload) // _SAMPLES
    sample = b"".join(view[i * step : i * step + _SAMPLE_BYTES] for i in range(_SAMPLES))
    return len(compress(codec, sample)) <= len(sample) * (1 - MIN_SAVING / 2)


def compress(codec: Codec, payload: bytes) -> bytes:
    if codec == Codec.NONE:
        return payload
    return pa.Codec("zstd", compression_level=_ZSTD_LEVEL).compress(payload, asbytes=True)


def decompress(codec: int, stored: bytes, raw_length: int, *, path: str | None = None,
               state: str | None = None, byte_range: tuple[int, int] | None = None) -> bytes:
    """Decompress ``stored`` into exactly ``raw_length`` bytes.

    The output buffer is sized by the manifest's declared ``raw_length``, which the
    caller has already bounded, so a decompression bomb cannot grow past it.
    """
    where: dict[str, Any] = dict(path=path, state=state, byte_range=byte_range)
    if codec == Codec.NONE:
        if len(stored) != raw_length:
            raise CorruptSavepointError(
                f"uncompressed chunk is {len(stored)} bytes but the manifest says {raw_length}", **where)
        return stored
    if codec == Codec.ZSTD:
        if raw_length > MAX_RAW_LENGTH:
            raise CorruptSavepointError(f"declared raw length {raw_length} exceeds the format limit", **where)
        if raw_length > MAX_ZSTD_RATIO * len(stored):
            raise CorruptSavepointError(f"declared raw length {raw_length} is more than zstd can expand "
                                        f"{len(stored)} stored bytes to", **where)
        check_single_frame(stored, **where)
        try:  # the frame's content checksum, when it has one, is checked here (spec/format.md §7.3)
            return pa.Codec("zstd").decompress(stored, decompressed_size=raw_length, asbytes=True)
        except (OSError, pa.ArrowException) as exc:
            raise CorruptSavepointError(f"zstd chunk does not decompress to {raw_length} bytes: {exc}", **where) from None
    raise UnsupportedFormatError(f"unknown codec number {codec}", **where)
