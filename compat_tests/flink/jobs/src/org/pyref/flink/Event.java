package org.pyref.flink;

/** The record of every corpus job (a Flink POJO). {@code end} marks a source split's last record. */
public class Event {
    public String key;
    public long num;
    public long ts;
    public long seq;
    public int part;
    public long offset;
    public boolean end;

    public Event() {}

    public Event(String key, long num, long ts) {
        this.key = key;
        this.num = num;
        this.ts = ts;
    }

    static Event end(long ts) {
        Event e = new Event(null, 0, ts);
        e.end = true;
        return e;
    }
}
