package org.pyref.flink;

import java.util.List;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/** Flink 2.0 removed the Scala API (flink-scala): its type names are refused (compat/scala/1.13 has them). */
final class ScalaTypes {
    private ScalaTypes() {}

    static TypeInformation<?> parse(String head, List<TypeInformation<?>> args) {
        throw new UnsupportedOperationException("Scala type " + head + ": Flink 2.0 and later have no Scala API");
    }

    static JsonNode json(Object v) {
        return null;
    }
}
