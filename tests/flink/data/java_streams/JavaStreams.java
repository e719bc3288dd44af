import java.io.ByteArrayOutputStream;
import java.io.Externalizable;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.ObjectInput;
import java.io.ObjectOutput;
import java.io.ObjectOutputStream;
import java.io.Serializable;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Writes streams.bin for tests/flink/test_java_stream.py: Java serialization streams covering
 * the grammar beyond what Flink's LogicalTypes use, each as an int length then the stream.
 * Run: javac JavaStreams.java && java JavaStreams (Java 17), from this directory.
 */
public class JavaStreams {
    static class Node implements Serializable {
        int id;
        Node next;  // a reference loop: the last node points back to the first
        Object payload;
    }

    static class Base implements Serializable {
        long stamp = 7;
        double ratio = 0.5;
    }

    /** A subclass with its own writeObject: its slot ends with block data and objects. */
    static class Custom extends Base {
        transient String hidden = "h";
        char mark = 'x';
        private void writeObject(java.io.ObjectOutputStream out) throws IOException {
            out.defaultWriteObject();
            out.writeInt(42);
            out.writeUTF("extra");
            out.writeObject(new int[] {1, 2, 3});
            out.write(new byte[300]);  // long block data
        }
    }

    public static class Ext implements Externalizable {
        public Ext() {}
        public void writeExternal(ObjectOutput out) throws IOException {
            out.writeLong(1L);
            out.writeObject("inside");
        }
        public void readExternal(ObjectInput in) {}
    }

    static class Handler implements InvocationHandler, Serializable {
        public Object invoke(Object proxy, Method method, Object[] args) {
            return null;
        }
    }

    public static void main(String[] args) throws Exception {
        Node a = new Node();
        Node b = new Node();
        a.id = 1;
        a.next = b;
        b.id = 2;
        b.next = a;
        b.payload = new String[][] {{"x", null}, {}};
        HashMap<String, Object> map = new HashMap<>();
        map.put("unit", TimeUnit.SECONDS);
        map.put("class", String.class);
        map.put("list", new ArrayList<>(List.of(1L, 2.5f, true, 'c', (short) 3, (byte) 4)));
        map.put("longs", new long[] {1L, 2L});
        Object proxy = Proxy.newProxyInstance(JavaStreams.class.getClassLoader(), new Class<?>[] {Runnable.class},
                new Handler());
        Object[] objects = {a, map, new Custom(), new Ext(), proxy, null, "just a string", TimeUnit.DAYS,
            new Object[] {a, a, map}};
        try (FileOutputStream file = new FileOutputStream("streams.bin")) {
            for (Object o : objects) {
                ByteArrayOutputStream bytes = new ByteArrayOutputStream();
                try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
                    out.writeObject(o);
                }
                byte[] stream = bytes.toByteArray();
                file.write(new byte[] {(byte) (stream.length >>> 24), (byte) (stream.length >>> 16),
                    (byte) (stream.length >>> 8), (byte) stream.length});
                file.write(stream);
            }
        }
    }
}
