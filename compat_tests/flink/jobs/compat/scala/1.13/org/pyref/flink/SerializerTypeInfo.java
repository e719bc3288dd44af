package org.pyref.flink;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;

/** Type information that hands out one given serializer: how a Java job declares state with the Scala API's serializers. */
final class SerializerTypeInfo<T> extends TypeInformation<T> {
    private static final long serialVersionUID = 1L;

    private final Class<T> type;
    private final TypeSerializer<T> serializer;
    private final String name;

    SerializerTypeInfo(Class<T> type, TypeSerializer<T> serializer, String name) {
        this.type = type;
        this.serializer = serializer;
        this.name = name;
    }

    @Override public boolean isBasicType() { return false; }
    @Override public boolean isTupleType() { return false; }
    @Override public int getArity() { return 1; }
    @Override public int getTotalFields() { return 1; }
    @Override public Class<T> getTypeClass() { return type; }
    @Override public boolean isKeyType() { return false; }
    @Override public TypeSerializer<T> createSerializer(ExecutionConfig config) { return serializer.duplicate(); }
    @Override public String toString() { return name; }
    @Override public boolean equals(Object o) { return o instanceof SerializerTypeInfo && ((SerializerTypeInfo<?>) o).name.equals(name); }
    @Override public int hashCode() { return name.hashCode(); }
    @Override public boolean canEqual(Object o) { return o instanceof SerializerTypeInfo; }
}
