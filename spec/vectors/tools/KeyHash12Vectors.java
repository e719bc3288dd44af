/*
 * Generates spec/vectors/java-key-hash-1.2.json: key hashes and key groups of the
 * key types format 1.2 adds (int8, int16, float32, char), computed by the JVM.
 *
 * Run from spec/vectors/ with Java 17 or newer (single-file source launch, no
 * dependencies):
 *
 *     java tools/KeyHash12Vectors.java > java-key-hash-1.2.json
 *
 * The key hash is the JDK's own Byte.hashCode, Short.hashCode, Float.hashCode
 * (floatToIntBits: every NaN hashes as 0x7fc00000) and Character.hashCode; a tuple
 * key is hashed like Flink's TupleN.hashCode. murmurHash and the key-group formula
 * are transcribed from Flink's MathUtils and KeyGroupRangeAssignment, as in
 * KeyHashVectors.java. The output is deterministic.
 */

import java.util.ArrayList;
import java.util.List;

public final class KeyHash12Vectors {

    private static final int[] MAX_PARALLELISMS = {1, 7, 128, 4096, 32768};

    static int murmurHash(int code) {
        code *= 0xcc9e2d51;
        code = Integer.rotateLeft(code, 15);
        code *= 0x1b873593;
        code = Integer.rotateLeft(code, 13);
        code = code * 5 + 0xe6546b64;
        code ^= 4;
        code ^= code >>> 16;
        code *= 0x85ebca6b;
        code ^= code >>> 13;
        code *= 0xc2b2ae35;
        code ^= code >>> 16;
        if (code >= 0) {
            return code;
        } else if (code != Integer.MIN_VALUE) {
            return -code;
        } else {
            return 0;
        }
    }

    /** A key type is "int8", "int16", "float32", "char" or an Object[] of key types (a tuple). */
    static int keyHash(Object type, Object key) {
        if (type instanceof Object[]) {
            Object[] types = (Object[]) type;
            Object[] fields = (Object[]) key;
            int result = keyHash(types[0], fields[0]);
            for (int i = 1; i < types.length; i++) {
                result = 31 * result + keyHash(types[i], fields[i]);
            }
            return result;
        }
        switch ((String) type) {
            case "int8":
                return Byte.hashCode((Byte) key);
            case "int16":
                return Short.hashCode((Short) key);
            case "float32":
                return Float.hashCode((Float) key);
            case "char":
                return Character.hashCode((Character) key);
            default:
                throw new IllegalArgumentException("unknown key type " + type);
        }
    }

    static String typeJson(Object type) {
        if (type instanceof Object[]) {
            List<String> parts = new ArrayList<>();
            for (Object t : (Object[]) type) {
                parts.add(typeJson(t));
            }
            return "[" + String.join(", ", parts) + "]";
        }
        return "\"" + type + "\"";
    }

    /** float32 as the 8 hex digits of its raw bits (NaN payloads kept), char as its code unit. */
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
            case "float32":
                return String.format("\"%08x\"", Float.floatToRawIntBits((Float) key));
            case "char":
                return String.valueOf((int) (Character) key);
            default:
                return String.valueOf(key);
        }
    }

    static final List<Object[]> KEYS = new ArrayList<>();

    static void add(Object type, Object key) {
        KEYS.add(new Object[] {type, key});
    }

    static void buildKeys() {
        for (int v : new int[] {0, 1, -1, 42, 127, -128}) {
            add("int8", (byte) v);
        }
        for (int v : new int[] {0, 1, -1, 300, 32767, -32768}) {
            add("int16", (short) v);
        }
        add("float32", 0.0f);
        add("float32", -0.0f);           // a different key than 0.0f: different bits
        add("float32", 1.5f);
        add("float32", -2.25f);
        add("float32", Float.MIN_VALUE);   // the smallest subnormal
        add("float32", Float.MAX_VALUE);
        add("float32", Float.POSITIVE_INFINITY);
        add("float32", Float.NEGATIVE_INFINITY);
        add("float32", Float.NaN);                                // 7fc00000
        add("float32", Float.intBitsToFloat(0x7fc00123));         // a NaN with a payload: hashes as 7fc00000
        add("float32", Float.intBitsToFloat(0xffc00000));         // a negative NaN: the same hash
        add("char", 'a');
        add("char", '\u0000');
        add("char", '\u00e9');
        add("char", '\ud800');   // a lone surrogate is a valid char
        add("char", '\uffff');
        add(new Object[] {"int8", "char"}, new Object[] {(byte) -1, 'x'});
        add(new Object[] {"int16", "float32"}, new Object[] {(short) 7, 0.5f});
    }

    public static void main(String[] args) {
        buildKeys();
        StringBuilder out = new StringBuilder("{\n");
        out.append(" \"source\": \"Computed by the JVM (").append(System.getProperty("java.vendor")).append(' ')
                .append(System.getProperty("java.version"))
                .append(") with spec/vectors/tools/KeyHash12Vectors.java: key hashes are the JDK's own "
                        + "Byte.hashCode, Short.hashCode, Float.hashCode and Character.hashCode; tuple keys "
                        + "as Flink TupleN.hashCode; murmurHash and the key-group formula transcribed from "
                        + "Flink\",\n");
        out.append(" \"note\": \"format 1.2 key types; key is a number for int8, int16 and char (the "
                + "UTF-16 code unit), the 8 lowercase hex digits of the raw binary32 bits for float32, "
                + "an array for a tuple\",\n");
        out.append(" \"key_hash\": [\n");
        for (int i = 0; i < KEYS.size(); i++) {
            Object type = KEYS.get(i)[0];
            Object key = KEYS.get(i)[1];
            int h = keyHash(type, key);
            out.append("  {\"type\": ").append(typeJson(type)).append(", \"key\": ").append(keyJson(type, key))
                    .append(", \"java_hash\": ").append(h).append(", \"murmur_hash\": ").append(murmurHash(h))
                    .append(i + 1 < KEYS.size() ? "},\n" : "}\n");
        }
        out.append(" ],\n \"assign_to_key_group\": [\n");
        List<String> rows = new ArrayList<>();
        for (int maxParallelism : MAX_PARALLELISMS) {
            for (Object[] entry : KEYS) {
                int h = keyHash(entry[0], entry[1]);
                rows.add("  {\"type\": " + typeJson(entry[0]) + ", \"key\": " + keyJson(entry[0], entry[1])
                        + ", \"max_parallelism\": " + maxParallelism
                        + ", \"key_group\": " + (murmurHash(h) % maxParallelism) + "}");
            }
        }
        out.append(String.join(",\n", rows)).append("\n ]\n}\n");
        System.out.print(out);
    }
}
