package org.pyref.flink;

import java.util.List;
import java.util.Map;

/**
 * A POJO with a nested POJO, a List and a Map field: Flink 1.x serializes the collection
 * fields with Kryo, Flink 2.x with its own List/Map serializers.
 */
public class Profile {
    public String name;
    public PageStats stats;
    public List<String> tags;
    public Map<String, Integer> scores;

    public Profile() {}
}
