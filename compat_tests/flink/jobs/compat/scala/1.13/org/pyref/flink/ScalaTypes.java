package org.pyref.flink;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.api.scala.typeutils.EitherSerializer;
import org.apache.flink.api.scala.typeutils.EnumValueSerializer;
import org.apache.flink.api.scala.typeutils.NothingSerializer;
import org.apache.flink.api.scala.typeutils.OptionSerializer;
import org.apache.flink.api.scala.typeutils.ScalaCaseClassSerializer;
import org.apache.flink.api.scala.typeutils.TraversableSerializer;
import org.apache.flink.api.scala.typeutils.TrySerializer;
import org.apache.flink.api.scala.typeutils.UnitSerializer;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The Scala API's serializers (flink-scala, Flink 1.x), built from Java as a Scala job's type
 * information would build them, behind the corpus type names (Types.parse hands every name that
 * starts with "Scala" here):
 * ScalaCaseClass:CLASS&lt;T1,...&gt; (ScalaCaseClassSerializer of a case class, e.g. scala.Tuple3),
 * ScalaTuple2&lt;A,B&gt; (the Scala API's Tuple2 type information: Tuple2CaseClassSerializerSnapshot),
 * ScalaOption&lt;T&gt;, ScalaEither&lt;L,R&gt;, ScalaTry&lt;T&gt;, ScalaList&lt;T&gt; and ScalaMap&lt;K,V&gt;
 * (TraversableSerializer of an immutable List / Map with the CanBuildFrom code Flink compiles),
 * ScalaRoundingMode (EnumValueSerializer of scala.math.BigDecimal.RoundingMode), ScalaUnit, ScalaNothing.
 *
 * <p>Values in JSON: a case class (or tuple) is an array of its fields, Some(x) is {"some": x} and
 * None null, Left / Right are {"left": x} / {"right": x}, Success(x) is {"success": x} and Failure(t)
 * {"failure": "CLASS: MESSAGE"}, a List an array, a Map [key, value] pairs sorted by key, an
 * Enumeration value its name, Unit "unit".
 */
final class ScalaTypes {
    private ScalaTypes() {}

    static final String LIST = "scala.collection.immutable.List";
    static final String MAP = "scala.collection.immutable.Map";

    @SuppressWarnings({"unchecked", "rawtypes"})
    static TypeInformation<?> parse(String head, List<TypeInformation<?>> args) {
        TypeSerializer<?>[] fields = new TypeSerializer<?>[args.size()];
        for (int i = 0; i < fields.length; i++) {
            fields[i] = args.get(i).createSerializer(new ExecutionConfig());
        }
        if (head.startsWith("ScalaCaseClass:")) {
            Class<?> type = load(head.substring("ScalaCaseClass:".length()));
            return new SerializerTypeInfo(type, new ScalaCaseClassSerializer(type, fields), head);
        }
        switch (head + "/" + args.size()) {
            case "ScalaTuple2/2":
                return org.apache.flink.api.scala.package$.MODULE$.createTuple2TypeInformation(args.get(0), args.get(1));
            case "ScalaOption/1":
                return new SerializerTypeInfo(scala.Option.class, new OptionSerializer(fields[0]), head);
            case "ScalaEither/2":
                return new SerializerTypeInfo(scala.util.Either.class, new EitherSerializer(fields[0], fields[1]), head);
            case "ScalaTry/1":
                return new SerializerTypeInfo(scala.util.Try.class,
                        new TrySerializer(fields[0], new KryoSerializer<>(Throwable.class, new ExecutionConfig())), head);
            case "ScalaList/1":
                return traversable(LIST, fields[0], typeName(args.get(0)), head);
            case "ScalaMap/2": {
                TypeInformation<?> entry = org.apache.flink.api.scala.package$.MODULE$.createTuple2TypeInformation(
                        args.get(0), args.get(1));
                String pair = "(" + typeName(args.get(0)) + ", " + typeName(args.get(1)) + ")";
                String map = MAP + "[" + typeName(args.get(0)) + ", " + typeName(args.get(1)) + "]";
                String cbf = "implicitly[scala.collection.generic.CanBuildFrom[" + map + ", " + pair + ", " + map + "]]";
                return new SerializerTypeInfo(scala.collection.immutable.Map.class,
                        new TraversableSerializer(entry.createSerializer(new ExecutionConfig()), cbf), head);
            }
            case "ScalaRoundingMode/0":
                return new SerializerTypeInfo(scala.Enumeration.Value.class,
                        new EnumValueSerializer(scala.math.BigDecimal.RoundingMode$.MODULE$), head);
            case "ScalaUnit/0":
                return new SerializerTypeInfo(scala.runtime.BoxedUnit.class, new UnitSerializer(), head);
            case "ScalaNothing/0":
                return new SerializerTypeInfo(Object.class, new NothingSerializer(), head);
            default:
                throw new IllegalArgumentException("unknown Scala type name " + head + " with " + args.size() + " arguments");
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static TypeInformation<?> traversable(String collection, TypeSerializer<?> element, String elementName,
                                                  String head) {
        String type = collection + "[" + elementName + "]";
        String cbf = "implicitly[scala.collection.generic.CanBuildFrom[" + type + ", " + elementName + ", " + type + "]]";
        return new SerializerTypeInfo(scala.collection.immutable.List.class, new TraversableSerializer(element, cbf), head);
    }

    /** The Scala name of an element type in CanBuildFrom code (Java's boxed numbers are Scala's value types). */
    private static String typeName(TypeInformation<?> t) {
        if (t instanceof SerializerTypeInfo) {
            throw new IllegalArgumentException("Scala collections of Scala-only types are not in the corpus: " + t);
        }
        Class<?> c = t.getTypeClass();
        if (c == scala.Tuple2.class) {
            return "(" + typeName(((org.apache.flink.api.common.typeutils.CompositeType<?>) t).getTypeAt(0)) + ", "
                    + typeName(((org.apache.flink.api.common.typeutils.CompositeType<?>) t).getTypeAt(1)) + ")";
        }
        switch (c.getName()) {
            case "java.lang.Long": return "Long";
            case "java.lang.Integer": return "Int";
            case "java.lang.Double": return "Double";
            case "java.lang.Boolean": return "Boolean";
            case "java.lang.String": return "String";
            default: return c.getName();
        }
    }

    private static Class<?> load(String className) {
        try {
            return Class.forName(className, true, ScalaTypes.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            throw new IllegalArgumentException("case class " + className + " is not on the classpath", e);
        }
    }

    /** A Scala value as JSON (see the class comment), or null when {@code v} is not a Scala value. */
    static JsonNode json(Object v) {
        if (v instanceof scala.Option) {
            scala.Option<?> o = (scala.Option<?>) v;
            return o.isEmpty() ? Json.F.nullNode() : tagged("some", o.get());
        }
        if (v instanceof scala.util.Left) {
            return tagged("left", ((scala.util.Left<?, ?>) v).left().get());
        }
        if (v instanceof scala.util.Right) {
            return tagged("right", ((scala.util.Right<?, ?>) v).right().get());
        }
        if (v instanceof scala.util.Success) {
            return tagged("success", ((scala.util.Success<?>) v).value());
        }
        if (v instanceof scala.util.Failure) {
            Throwable t = ((scala.util.Failure<?>) v).exception();
            ObjectNode o = Json.object();
            o.put("failure", t.getClass().getName() + ": " + t.getMessage());
            return o;
        }
        if (v instanceof scala.collection.Map) {
            List<java.util.Map.Entry<?, ?>> entries = new ArrayList<>();
            scala.collection.Iterator<?> it = ((scala.collection.Map<?, ?>) v).iterator();
            while (it.hasNext()) {
                scala.Tuple2<?, ?> e = (scala.Tuple2<?, ?>) it.next();
                entries.add(new java.util.AbstractMap.SimpleEntry<>(e._1(), e._2()));
            }
            return Json.pairs(entries);
        }
        if (v instanceof scala.collection.TraversableOnce) {
            ArrayNode a = Json.array();
            scala.collection.Iterator<?> it = ((scala.collection.TraversableOnce<?>) v).toIterator();
            while (it.hasNext()) {
                a.add(Json.value(it.next()));
            }
            return a;
        }
        if (v instanceof scala.Product) {
            scala.Product p = (scala.Product) v;
            ArrayNode a = Json.array();
            for (int i = 0; i < p.productArity(); i++) {
                a.add(Json.value(p.productElement(i)));
            }
            return a;
        }
        if (v instanceof scala.Enumeration.Value) {
            return Json.F.textNode(v.toString());
        }
        if (v instanceof scala.runtime.BoxedUnit) {
            return Json.F.textNode("unit");
        }
        return null;
    }

    private static ObjectNode tagged(String tag, Object value) {
        ObjectNode o = Json.object();
        o.set(tag, Json.value(value));
        return o;
    }
}
