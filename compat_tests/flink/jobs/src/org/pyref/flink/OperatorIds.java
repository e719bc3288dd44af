package org.pyref.flink;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * Flink's operator id of a uid: Guava's murmur3_128 (seed 0) over the uid's UTF-8 bytes, as
 * Flink's StreamGraphHasherV2 computes it (Guava is shaded under a version-specific package,
 * so the hash is written out here and checked against getOperatorID() at run time).
 */
final class OperatorIds {
    private OperatorIds() {}

    static String fromUid(String uid) {
        byte[] data = uid.getBytes(StandardCharsets.UTF_8);
        ByteBuffer in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        long c1 = 0x87c37b91114253d5L, c2 = 0x4cf5ad432745937fL;
        long h1 = 0, h2 = 0;
        int blocks = data.length / 16;
        for (int i = 0; i < blocks; i++) {
            long k1 = in.getLong(i * 16), k2 = in.getLong(i * 16 + 8);
            h1 ^= mixK1(k1, c1, c2);
            h1 = Long.rotateLeft(h1, 27) + h2;
            h1 = h1 * 5 + 0x52dce729;
            h2 ^= mixK2(k2, c1, c2);
            h2 = Long.rotateLeft(h2, 31) + h1;
            h2 = h2 * 5 + 0x38495ab5;
        }
        long k1 = 0, k2 = 0;
        int tail = blocks * 16, rest = data.length - tail;
        for (int i = rest - 1; i >= 8; i--) {
            k2 ^= (long) (data[tail + i] & 0xff) << (8 * (i - 8));
        }
        for (int i = Math.min(rest, 8) - 1; i >= 0; i--) {
            k1 ^= (long) (data[tail + i] & 0xff) << (8 * i);
        }
        h1 ^= mixK1(k1, c1, c2);
        h2 ^= mixK2(k2, c1, c2);
        h1 ^= data.length;
        h2 ^= data.length;
        h1 += h2;
        h2 += h1;
        h1 = fmix(h1);
        h2 = fmix(h2);
        h1 += h2;
        h2 += h1;
        byte[] out = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(h1).putLong(h2).array();
        return Json.hex(out);
    }

    private static long mixK1(long k1, long c1, long c2) {
        return Long.rotateLeft(k1 * c1, 31) * c2;
    }

    private static long mixK2(long k2, long c1, long c2) {
        return Long.rotateLeft(k2 * c2, 33) * c1;
    }

    private static long fmix(long k) {
        k ^= k >>> 33;
        k *= 0xff51afd7ed558ccdL;
        k ^= k >>> 33;
        k *= 0xc4ceb9fe1a85ec53L;
        k ^= k >>> 33;
        return k;
    }
}
