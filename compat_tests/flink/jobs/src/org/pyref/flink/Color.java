package org.pyref.flink;

/** An enum value type: Flink's EnumSerializer. */
public enum Color {
    RED, GREEN, BLUE
}
