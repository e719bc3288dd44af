package org.pyref.flink;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.EnumTypeInfo;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.api.java.typeutils.ListTypeInfo;
import org.apache.flink.api.java.typeutils.MapTypeInfo;
import org.apache.flink.api.java.typeutils.PojoTypeInfo;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.api.java.typeutils.TupleTypeInfo;

/**
 * The type names of the corpus README ("Type names"): Boolean, Byte, Short, Integer, Long,
 * Float, Double, Character, String, byte[], int[], long[], double[], TupleN&lt;T1,...&gt;,
 * Row&lt;T1,...&gt;, List&lt;T&gt;, Map&lt;K,V&gt;, pojo:CLASS (must be a Flink POJO), enum:CLASS,
 * kryo:CLASS (Flink's generic type: Kryo), and on Flink 1.x the Scala API's types (names starting with
 * "Scala": see ScalaTypes in compat/scala).
 */
final class Types {
    private Types() {}

    static TypeInformation<?> parse(String name) {
        String s = name.trim();
        switch (s) {
            case "Boolean": return BasicTypeInfo.BOOLEAN_TYPE_INFO;
            case "Byte": return BasicTypeInfo.BYTE_TYPE_INFO;
            case "Short": return BasicTypeInfo.SHORT_TYPE_INFO;
            case "Integer": return BasicTypeInfo.INT_TYPE_INFO;
            case "Long": return BasicTypeInfo.LONG_TYPE_INFO;
            case "Float": return BasicTypeInfo.FLOAT_TYPE_INFO;
            case "Double": return BasicTypeInfo.DOUBLE_TYPE_INFO;
            case "Character": return BasicTypeInfo.CHAR_TYPE_INFO;
            case "String": return BasicTypeInfo.STRING_TYPE_INFO;
            case "byte[]": return PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO;
            case "long[]": return PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO;
            case "int[]": return PrimitiveArrayTypeInfo.INT_PRIMITIVE_ARRAY_TYPE_INFO;
            case "double[]": return PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO;
            default: break;
        }
        if (s.startsWith("pojo:")) {
            TypeInformation<?> t = TypeInformation.of(load(s.substring(5)));
            if (!(t instanceof PojoTypeInfo)) {
                throw new IllegalArgumentException(s + " is not a Flink POJO: " + t);
            }
            return t;
        }
        if (s.startsWith("enum:")) {
            TypeInformation<?> t = TypeInformation.of(load(s.substring(5)));
            if (!(t instanceof EnumTypeInfo)) {
                throw new IllegalArgumentException(s + " is not an enum: " + t);
            }
            return t;
        }
        if (s.startsWith("kryo:")) {
            return new GenericTypeInfo<>(load(s.substring(5)));
        }
        int open = s.indexOf('<');
        if (open < 0 && s.startsWith("Scala")) {
            return ScalaTypes.parse(s, new ArrayList<>());
        }
        if (open < 0 || !s.endsWith(">")) {
            throw new IllegalArgumentException("unknown type name " + s);
        }
        String head = s.substring(0, open);
        List<TypeInformation<?>> args = new ArrayList<>();
        for (String arg : splitArguments(s.substring(open + 1, s.length() - 1))) {
            args.add(parse(arg));
        }
        if (head.startsWith("Scala")) {
            return ScalaTypes.parse(head, args);
        }
        if (head.equals("List") && args.size() == 1) {
            return new ListTypeInfo<>(args.get(0));
        }
        if (head.equals("Map") && args.size() == 2) {
            return new MapTypeInfo<>(args.get(0), args.get(1));
        }
        if (head.equals("Row")) {
            return new RowTypeInfo(args.toArray(new TypeInformation<?>[0]));
        }
        if (head.equals("Tuple" + args.size())) {
            return new TupleTypeInfo<>(args.toArray(new TypeInformation<?>[0]));
        }
        throw new IllegalArgumentException("unknown type name " + s);
    }

    /** {@link #parse} with the type the caller expects (unchecked). */
    @SuppressWarnings("unchecked")
    static <T> TypeInformation<T> of(String name) {
        return (TypeInformation<T>) parse(name);
    }

    static boolean isKryo(String name) {
        return name != null && name.startsWith("kryo:");
    }

    private static Class<?> load(String className) {
        try {
            return Class.forName(className, true, Types.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            throw new IllegalArgumentException("type class " + className + " is not on the classpath", e);
        }
    }

    private static List<String> splitArguments(String s) {
        List<String> out = new ArrayList<>();
        int depth = 0, start = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '<') {
                depth++;
            } else if (c == '>') {
                depth--;
            } else if (c == ',' && depth == 0) {
                out.add(s.substring(start, i));
                start = i + 1;
            }
        }
        out.add(s.substring(start));
        return out;
    }
}
