/*
 * Generates spec/vectors/java-key-hash-extra.json: key hashes and key groups
 * for the key types Flink's own vectors do not cover (boolean, bytes, tuples,
 * strings with characters outside the BMP), computed by the JVM itself.
 *
 * Run from the repository root with Java 17 or newer (single-file source launch,
 * no dependencies):
 *
 *     java spec/vectors/tools/KeyHashVectors.java > spec/vectors/java-key-hash-extra.json
 *
 * The key hash of every scalar key is the JDK's own hashCode method
 * (Integer.hashCode, Long.hashCode, String.hashCode, Boolean.hashCode,
 * java.util.Arrays.hashCode(byte[])); a tuple key is hashed like Flink's
 * org.apache.flink.api.java.tuple.TupleN.hashCode. murmurHash and the key-group
 * formula are transcribed from Flink's MathUtils and KeyGroupRangeAssignment.
 * The output is deterministic: rerunning it on the same JDK produces the same
 * bytes (only the "source" text names the JDK that ran it).
 */

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public final class KeyHashVectors {

    /** The max parallelisms every key is assigned at (the same as Flink's vector file). */
    private static final int[] MAX_PARALLELISMS = {1, 7, 128, 4096, 32768};

    // ------------------------------------------------------------------
    // Transcription of Flink MathUtils.murmurHash / bitMix and of
    // KeyGroupRangeAssignment.computeKeyGroupForKeyHash.
    // ------------------------------------------------------------------

    static int murmurHash(int code) {
        code *= 0xcc9e2d51;
        code = Integer.rotateLeft(code, 15);
        code *= 0x1b873593;

        code = Integer.rotateLeft(code, 13);
        code = code * 5 + 0xe6546b64;

        code ^= 4;
        code = bitMix(code);

        if (code >= 0) {
            return code;
        } else if (code != Integer.MIN_VALUE) {
            return -code;
        } else {
            return 0;
        }
    }

    static int bitMix(int in) {
        in ^= in >>> 16;
        in *= 0x85ebca6b;
        in ^= in >>> 13;
        in *= 0xc2b2ae35;
        in ^= in >>> 16;
        return in;
    }

    static int computeKeyGroupForKeyHash(int keyHash, int maxParallelism) {
        return murmurHash(keyHash) % maxParallelism;
    }

    // ------------------------------------------------------------------
    // Key hash: the JDK's hashCode methods, selected by the key type.
    // A key type is a String ("int32", "int64", "string", "boolean", "bytes")
    // or an Object[] of key types (a tuple key).
    // ------------------------------------------------------------------

    static int keyHash(Object type, Object key) {
        if (type instanceof Object[]) {
            Object[] types = (Object[]) type;
            Object[] fields = (Object[]) key;
            // Flink TupleN.hashCode: result = h(f0); result = 31 * result + h(fi) ...
            int result = keyHash(types[0], fields[0]);
            for (int i = 1; i < types.length; i++) {
                result = 31 * result + keyHash(types[i], fields[i]);
            }
            return result;
        }
        switch ((String) type) {
            case "int32":
                return Integer.hashCode((Integer) key);
            case "int64":
                return Long.hashCode((Long) key);
            case "string":
                return ((String) key).hashCode();
            case "boolean":
                return Boolean.hashCode((Boolean) key);
            case "bytes":
                return Arrays.hashCode((byte[]) key);
            default:
                throw new IllegalArgumentException("unknown key type " + type);
        }
    }

    // ------------------------------------------------------------------
    // Minimal JSON output (ASCII only: non-ASCII characters are written as
    // \\uXXXX escapes of their UTF-16 code units, surrogate pairs included).
    // ------------------------------------------------------------------

    static String jsonString(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static String hex(byte[] bytes) {
        StringBuilder b = new StringBuilder();
        for (byte x : bytes) {
            b.append(String.format("%02x", x & 0xff));
        }
        return b.toString();
    }

    static String typeJson(Object type) {
        if (type instanceof Object[]) {
            List<String> parts = new ArrayList<>();
            for (Object t : (Object[]) type) {
                parts.add(typeJson(t));
            }
            return "[" + String.join(", ", parts) + "]";
        }
        return jsonString((String) type);
    }

    /** A key as JSON: bytes as a lowercase hex string, a tuple as an array. */
    static String keyJson(Object type, Object key) {
        if (type instanceof Object[]) {
            Object[] types = (Object[]) type;
            Object[] fields = (Object[]) key;
            List<String> parts = new ArrayList<>();
            for (int i = 0; i < types.length; i++) {
                parts.add(keyJson(types[i], fields[i]));
            }
            return "[" + String.join(", ", parts) + "]";
        }
        switch ((String) type) {
            case "string":
                return jsonString((String) key);
            case "bytes":
                return jsonString(hex((byte[]) key));
            default:
                return String.valueOf(key);
        }
    }

    // ------------------------------------------------------------------
    // The keys.
    // ------------------------------------------------------------------

    static final List<Object[]> KEYS = new ArrayList<>(); // {type, key}

    static void add(Object type, Object key) {
        KEYS.add(new Object[] {type, key});
    }

    static Object[] tuple(Object... fields) {
        return fields;
    }

    static byte[] bytes(int... values) {
        byte[] b = new byte[values.length];
        for (int i = 0; i < values.length; i++) {
            b[i] = (byte) values[i];
        }
        return b;
    }

    static byte[] pattern(int length) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (i * 37 + 11);
        }
        return b;
    }

    static String repeat(String s, int n) {
        return s.repeat(n);
    }

    static void buildKeys() {
        add("boolean", Boolean.TRUE);
        add("boolean", Boolean.FALSE);

        // Bytes are signed in Java: 0x80..0xff are -128..-1.
        add("bytes", bytes());
        add("bytes", bytes(0x00));
        add("bytes", bytes(0x01));
        add("bytes", bytes(0x7f));
        add("bytes", bytes(0x80));
        add("bytes", bytes(0xff));
        add("bytes", bytes(0xff, 0x80));
        add("bytes", bytes(0x00, 0x00, 0x00));
        add("bytes", bytes(0xde, 0xad, 0xbe, 0xef));
        add("bytes", "user-42".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        add("bytes", "\u00fc".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        add("bytes", pattern(64));
        add("bytes", pattern(1000));

        // Strings: a character outside the BMP is two UTF-16 code units.
        add("string", "user-42");
        add("string", "\ud83d\ude00");                 // U+1F600
        add("string", "emoji \ud83d\ude00");
        add("string", "\ud834\udd1e clef");             // U+1D11E
        add("string", "\ud800\udc00");                  // U+10000, the first non-BMP code point
        add("string", "\udbff\udfff");                  // U+10FFFF, the last code point
        add("string", "a\ud83d\ude00b\ud83d\ude00c");
        add("string", "\u65e5\u672c\u8a9e\ud83c\uddef\ud83c\uddf5"); // CJK + flag (two non-BMP chars)
        add("string", "\uffff\ud800\udc00");           // U+FFFF next to U+10000
        add("string", "\u0000leading NUL");
        add("string", repeat("\ud83d\udd11k", 300));    // long, non-BMP throughout
        add("string", repeat("key-", 1000));            // long ASCII

        add("int64", 4294967296L);  // 2^32: high word 1, low word 0 -> hash 1
        add("int64", -4294967296L); // high word 0xffffffff, low word 0 -> hash -1
        add("int64", -42L);
        add("int32", -2089875627);  // the hash whose murmur is Integer.MIN_VALUE -> folded to 0

        Object[] stringInt = {"string", "int32"};
        add(stringInt, tuple("user-42", 7));
        add(stringInt, tuple("", 0));
        add(stringInt, tuple("\ud83d\ude00", -1));
        add(stringInt, tuple("a", Integer.MIN_VALUE));

        Object[] longStringBool = {"int64", "string", "boolean"};
        add(longStringBool, tuple(9876543210123L, "a", Boolean.TRUE));
        add(longStringBool, tuple(-1L, "", Boolean.FALSE));
        add(longStringBool, tuple(Long.MIN_VALUE, "\u00dcn\u00efc\u00f6d\u00e9", Boolean.TRUE));

        add(new Object[] {"bytes", "int64"}, tuple(bytes(0xff, 0x00), 5L));
        add(new Object[] {"boolean", "boolean"}, tuple(Boolean.TRUE, Boolean.FALSE));
        add(new Object[] {"int32"}, tuple(42)); // Tuple1: the field's own hash
        add(new Object[] {"int32", new Object[] {"string", "boolean"}}, tuple(1, tuple("x", Boolean.TRUE)));
        add(new Object[] {new Object[] {"int64", "bytes"}, "string"}, tuple(tuple(3L, bytes(0x80)), "z"));
    }

    static final int[] MURMUR_CODES = {
        0, 1, -1, 42, 1231, 1237, Integer.MAX_VALUE, Integer.MIN_VALUE, 123456789, -147182656,
        -2089875627, // murmur mixes this code to Integer.MIN_VALUE, which folds to 0
    };

    public static void main(String[] args) {
        buildKeys();
        StringBuilder out = new StringBuilder();
        out.append("{\n");
        out.append(" \"source\": ").append(jsonString(
                "Computed by the JVM (" + System.getProperty("java.vendor") + " "
                + System.getProperty("java.version") + ") with spec/vectors/tools/KeyHashVectors.java: "
                + "key hashes are the JDK's own Integer.hashCode, Long.hashCode, String.hashCode, "
                + "Boolean.hashCode and java.util.Arrays.hashCode(byte[]); tuple keys are hashed like "
                + "Flink TupleN.hashCode (31*h(f0)+h(f1)...); murmurHash and the key-group formula are "
                + "transcribed from Flink MathUtils and KeyGroupRangeAssignment")).append(",\n");
        out.append(" \"note\": ").append(jsonString(
                "type is a key type name or a JSON array of key types (a tuple key); key is the key "
                + "as JSON: a string, a number, a boolean, a lowercase hex string for bytes, an array "
                + "for a tuple; java_hash is the signed 32-bit key hash")).append(",\n");

        out.append(" \"murmur_hash\": [\n");
        for (int i = 0; i < MURMUR_CODES.length; i++) {
            int code = MURMUR_CODES[i];
            out.append("  {\"code\": ").append(code).append(", \"murmur_hash\": ").append(murmurHash(code)).append("}");
            out.append(i + 1 < MURMUR_CODES.length ? ",\n" : "\n");
        }
        out.append(" ],\n");

        out.append(" \"key_hash\": [\n");
        for (int i = 0; i < KEYS.size(); i++) {
            Object type = KEYS.get(i)[0];
            Object key = KEYS.get(i)[1];
            int h = keyHash(type, key);
            out.append("  {\"type\": ").append(typeJson(type))
                    .append(", \"key\": ").append(keyJson(type, key))
                    .append(", \"java_hash\": ").append(h)
                    .append(", \"murmur_hash\": ").append(murmurHash(h)).append("}");
            out.append(i + 1 < KEYS.size() ? ",\n" : "\n");
        }
        out.append(" ],\n");

        out.append(" \"assign_to_key_group\": [\n");
        List<String> rows = new ArrayList<>();
        for (int maxParallelism : MAX_PARALLELISMS) {
            for (Object[] entry : KEYS) {
                int h = keyHash(entry[0], entry[1]);
                rows.add("  {\"type\": " + typeJson(entry[0])
                        + ", \"key\": " + keyJson(entry[0], entry[1])
                        + ", \"max_parallelism\": " + maxParallelism
                        + ", \"key_group\": " + computeKeyGroupForKeyHash(h, maxParallelism) + "}");
            }
        }
        out.append(String.join(",\n", rows)).append("\n");
        out.append(" ]\n");
        out.append("}\n");
        System.out.print(out);
    }
}
