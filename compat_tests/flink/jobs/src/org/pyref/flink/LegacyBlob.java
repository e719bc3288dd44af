package org.pyref.flink;

import java.util.Arrays;

/** Not a POJO (final fields, no default constructor): Flink serializes it with Kryo. */
public final class LegacyBlob {
    private final String label;
    private final long[] values;

    public LegacyBlob(String label, long[] values) {
        this.label = label;
        this.values = values;
    }

    @Override
    public int hashCode() {
        return label.hashCode() * 31 + Arrays.hashCode(values);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof LegacyBlob && ((LegacyBlob) o).label.equals(label) && Arrays.equals(((LegacyBlob) o).values, values);
    }
}
