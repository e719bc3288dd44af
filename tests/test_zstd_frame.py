"""Rule Z2 (spec/format.md §7.3): a ZSTD chunk is exactly one frame with a window of at most
2^27 bytes; its content checksum is checked. The corpus cases (reject/reader-rules/zstd-*,
golden/1.0/zstd-frame-forms) run the same through the reader protocol; these cover the
frame walker's other exits."""

from __future__ import annotations

import pyarrow as pa
import pytest

from compat_tests.generate_reader_rules import (
    SKIPPABLE_FRAME,
    WINDOW_2_27,
    WINDOW_OVER_2_27,
    block_frame,
    zstd_frame,
)
from pyref.codecs import Codec, compress, decompress
from pyref.errors import CorruptSavepointError
from pyref.zstd_frame import MAX_WINDOW_SIZE, check_single_frame

PAYLOAD = b"\x00" * 300 + b"state bytes " * 40 + b"\x01" * 50


@pytest.mark.parametrize("frame", [
    compress(Codec.ZSTD, PAYLOAD),
    zstd_frame(PAYLOAD, checksum=True),
    zstd_frame(PAYLOAD, content_size=False, window_descriptor=WINDOW_2_27),
    block_frame(PAYLOAD),
])
def test_accepted_frames_decompress(frame):
    check_single_frame(frame)
    assert decompress(Codec.ZSTD, frame, len(PAYLOAD)) == PAYLOAD


@pytest.mark.parametrize("frame, message", [
    (b"\x28\xb5\x2f", "shorter than a frame header"),
    (SKIPPABLE_FRAME, "skippable frame"),
    (b"\x00" * 8, "magic number"),
    (zstd_frame(PAYLOAD)[:4] + bytes([0x08]) + zstd_frame(PAYLOAD)[5:], "reserved bit"),
    (zstd_frame(PAYLOAD, content_size=False)[:5], "cut short"),
    (zstd_frame(PAYLOAD, content_size=False, window_descriptor=WINDOW_OVER_2_27), "rule Z2"),
    (zstd_frame(PAYLOAD) + b"\x00", "follow the zstd frame"),
    (zstd_frame(PAYLOAD)[:-1], "cut short"),
    (block_frame(PAYLOAD)[:6] + bytes([0x07, 0, 0]), "reserved block type"),
    (block_frame(PAYLOAD)[:7], "inside a block header"),
    (b"\x28\xb5\x2f\xfd\x01\x38\x07" + bytes([0x01, 0, 0]), "needs a dictionary"),
])
def test_refused_frames(frame, message):
    with pytest.raises(CorruptSavepointError, match=message):
        check_single_frame(frame)


def test_window_limit_is_libzstds_default_and_a_larger_window_decodes_alike():
    assert MAX_WINDOW_SIZE == 1 << 27
    over = zstd_frame(PAYLOAD, content_size=False, window_descriptor=WINDOW_OVER_2_27)
    # zstd itself reads it: only the format refuses it.
    assert pa.Codec("zstd").decompress(over, decompressed_size=len(PAYLOAD), asbytes=True) == PAYLOAD


def test_content_checksum_is_checked():
    frame = zstd_frame(PAYLOAD, checksum=True)
    with pytest.raises(CorruptSavepointError, match="checksum"):
        decompress(Codec.ZSTD, frame[:-1] + bytes([frame[-1] ^ 1]), len(PAYLOAD))
