package org.pyref.flink;

import java.util.Objects;

/** A POJO key with its own hashCode: Flink's key groups follow it, not Object's. */
public class UserKey {
    public String region;
    public int id;

    public UserKey() {}

    public UserKey(String region, int id) {
        this.region = region;
        this.id = id;
    }

    @Override
    public int hashCode() {
        return region.hashCode() * 17 + id * 1000003;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof UserKey && ((UserKey) o).id == id && Objects.equals(((UserKey) o).region, region);
    }
}
