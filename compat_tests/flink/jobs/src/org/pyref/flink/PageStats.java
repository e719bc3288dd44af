package org.pyref.flink;

/** A POJO value: Flink's PojoSerializer writes it field by field. */
public class PageStats {
    public long views;
    public double ratio;
    public String lastUrl;

    public PageStats() {}
}
