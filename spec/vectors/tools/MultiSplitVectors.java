/*
 * Generates spec/vectors/redistribution-multi-split.json: operator list-state
 * redistribution cases with several SPLIT_DISTRIBUTE states per operator, which
 * exercise the rotation of the start subtask from one state to the next.
 *
 * Run from the repository root with Java 17 or newer (single-file source launch,
 * no dependencies):
 *
 *     java spec/vectors/tools/MultiSplitVectors.java > spec/vectors/redistribution-multi-split.json
 *
 * The SPLIT_DISTRIBUTE loop is a transcription of Flink's
 * RoundRobinOperatorStateRepartitioner.repartitionSplitState, with one change
 * that is the spec's rule (spec/redistribution.md): the SPLIT states are visited
 * in ascending order of the UTF-8 bytes of their names (unsigned bytewise), not
 * in java.util.HashMap order. UNION and BROADCAST follow repartitionUnionState
 * and repartitionBroadcastState; unchanged parallelism follows repartitionState
 * (everything in place, UNION state still given to every subtask).
 * Element indexes stand in for Flink's byte offsets.
 */

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class MultiSplitVectors {

    static final class State {
        final String name;
        final String mode; // SPLIT_DISTRIBUTE, UNION or BROADCAST
        final int[] counts; // elements per old subtask (partition)

        State(String name, String mode, int... counts) {
            this.name = name;
            this.mode = mode;
            this.counts = counts;
        }
    }

    static final class Case {
        final int oldParallelism;
        final int newParallelism;
        final State[] states;

        Case(int oldParallelism, int newParallelism, State... states) {
            this.oldParallelism = oldParallelism;
            this.newParallelism = newParallelism;
            this.states = states;
        }
    }

    /** An element: {old subtask, element index}. */
    static List<List<int[]>> emptyAssignment(int newParallelism) {
        List<List<int[]>> result = new ArrayList<>();
        for (int i = 0; i < newParallelism; i++) {
            result.add(new ArrayList<>());
        }
        return result;
    }

    static void addWholePartition(List<int[]> target, int oldSubtask, int count) {
        for (int k = 0; k < count; k++) {
            target.add(new int[] {oldSubtask, k});
        }
    }

    static int compareUtf8(String a, String b) {
        return Arrays.compareUnsigned(a.getBytes(StandardCharsets.UTF_8), b.getBytes(StandardCharsets.UTF_8));
    }

    static List<String> splitOrder(Case c) {
        List<String> names = new ArrayList<>();
        for (State s : c.states) {
            if (s.mode.equals("SPLIT_DISTRIBUTE")) {
                names.add(s.name);
            }
        }
        names.sort(MultiSplitVectors::compareUtf8);
        return names;
    }

    static Map<String, List<List<int[]>>> repartition(Case c) {
        int newParallelism = c.newParallelism;
        Map<String, List<List<int[]>>> result = new LinkedHashMap<>();
        Map<String, State> byName = new LinkedHashMap<>();
        for (State s : c.states) {
            result.put(s.name, emptyAssignment(newParallelism));
            byName.put(s.name, s);
        }

        if (c.oldParallelism == newParallelism) {
            // repartitionState: unchanged parallelism keeps every subtask's state,
            // and UNION state is still given to every subtask.
            for (State s : c.states) {
                List<List<int[]>> a = result.get(s.name);
                for (int i = 0; i < newParallelism; i++) {
                    if (s.mode.equals("UNION")) {
                        for (int p = 0; p < s.counts.length; p++) {
                            addWholePartition(a.get(i), p, s.counts[p]);
                        }
                    } else {
                        addWholePartition(a.get(i), i, s.counts[i]);
                    }
                }
            }
            return result;
        }

        // repartitionSplitState, states in UTF-8 byte order of their names.
        int startParallelOp = 0;
        for (String name : splitOrder(c)) {
            State s = byName.get(name);
            List<List<int[]>> a = result.get(name);
            // "current": one entry per old subtask, offsets[k] = element index k.
            List<int[]> subtaskOf = new ArrayList<>();
            List<long[]> current = new ArrayList<>();
            for (int p = 0; p < s.counts.length; p++) {
                long[] offsets = new long[s.counts[p]];
                for (int k = 0; k < offsets.length; k++) {
                    offsets[k] = k;
                }
                subtaskOf.add(new int[] {p});
                current.add(offsets);
            }

            int totalPartitions = 0;
            for (long[] offsets : current) {
                totalPartitions += offsets.length;
            }

            int lstIdx = 0;
            int offsetIdx = 0;
            int baseFraction = totalPartitions / newParallelism;
            int remainder = totalPartitions % newParallelism;

            int newStartParallelOp = startParallelOp;

            for (int i = 0; i < newParallelism; ++i) {
                int parallelOpIdx = (i + startParallelOp) % newParallelism;

                int numberOfPartitionsToAssign = baseFraction;

                if (remainder > 0) {
                    ++numberOfPartitionsToAssign;
                    --remainder;
                } else if (remainder == 0) {
                    newStartParallelOp = parallelOpIdx;
                    --remainder;
                }

                while (numberOfPartitionsToAssign > 0) {
                    long[] offsets = current.get(lstIdx);
                    int oldSubtask = subtaskOf.get(lstIdx)[0];
                    int remaining = offsets.length - offsetIdx;
                    long[] offs;
                    if (remaining > numberOfPartitionsToAssign) {
                        offs = Arrays.copyOfRange(offsets, offsetIdx, offsetIdx + numberOfPartitionsToAssign);
                        offsetIdx += numberOfPartitionsToAssign;
                    } else {
                        offs = Arrays.copyOfRange(offsets, offsetIdx, offsets.length);
                        offsetIdx = 0;
                        ++lstIdx;
                    }

                    numberOfPartitionsToAssign -= remaining;

                    for (long off : offs) {
                        a.get(parallelOpIdx).add(new int[] {oldSubtask, (int) off});
                    }
                }
            }
            startParallelOp = newStartParallelOp;
        }

        for (State s : c.states) {
            List<List<int[]>> a = result.get(s.name);
            if (s.mode.equals("UNION")) {
                // repartitionUnionState: every new subtask gets every old partition.
                for (int i = 0; i < newParallelism; i++) {
                    for (int p = 0; p < s.counts.length; p++) {
                        addWholePartition(a.get(i), p, s.counts[p]);
                    }
                }
            } else if (s.mode.equals("BROADCAST")) {
                // repartitionBroadcastState: new subtask i takes old subtask i % previousParallelism.
                int previousParallelism = s.counts.length;
                for (int i = 0; i < newParallelism; i++) {
                    int p = i % previousParallelism;
                    addWholePartition(a.get(i), p, s.counts[p]);
                }
            }
        }
        return result;
    }

    // ------------------------------------------------------------------
    // Minimal JSON output (ASCII only; non-ASCII as \\uXXXX UTF-16 escapes).
    // ------------------------------------------------------------------

    static String jsonString(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch == '"' || ch == '\\') {
                b.append('\\').append(ch);
            } else if (ch < 0x20 || ch > 0x7e) {
                b.append(String.format("\\u%04x", (int) ch));
            } else {
                b.append(ch);
            }
        }
        return b.append('"').toString();
    }

    static String ints(int[] values) {
        List<String> parts = new ArrayList<>();
        for (int v : values) {
            parts.add(String.valueOf(v));
        }
        return "[" + String.join(", ", parts) + "]";
    }

    static final Case[] CASES = {
        // Extras rotate: "a" gives its extra to subtask 0, "b" starts at 1, "c" at 2.
        new Case(2, 3,
            new State("a", "SPLIT_DISTRIBUTE", 2, 2),
            new State("b", "SPLIT_DISTRIBUTE", 2, 2),
            new State("c", "SPLIT_DISTRIBUTE", 1, 1)),
        // One element per state: consecutive states land on consecutive subtasks.
        new Case(1, 4,
            new State("e", "SPLIT_DISTRIBUTE", 1),
            new State("d", "SPLIT_DISTRIBUTE", 1),
            new State("c", "SPLIT_DISTRIBUTE", 1),
            new State("b", "SPLIT_DISTRIBUTE", 1),
            new State("a", "SPLIT_DISTRIBUTE", 1)),
        // Byte order, not alphabetical: "B" (0x42) < "a" < "ab" (a prefix sorts first).
        new Case(3, 2,
            new State("ab", "SPLIT_DISTRIBUTE", 1, 1, 1),
            new State("a", "SPLIT_DISTRIBUTE", 2, 0, 1),
            new State("B", "SPLIT_DISTRIBUTE", 0, 0, 1)),
        // UTF-8 order differs from Java's String.compareTo (UTF-16) order:
        // U+FF61 (EF BD A1) < U+1F600 (F0 9F 98 80) in UTF-8, but its UTF-16 unit
        // 0xFF61 > 0xD83D. "z" (0x7A) sorts before both.
        new Case(2, 3,
            new State("\ud83d\ude00", "SPLIT_DISTRIBUTE", 1, 0),
            new State("\uff61", "SPLIT_DISTRIBUTE", 1, 0),
            new State("z", "SPLIT_DISTRIBUTE", 0, 1)),
        // No remainder: the start does not move ("a"), then it does ("b", "c").
        new Case(2, 5,
            new State("a", "SPLIT_DISTRIBUTE", 5, 5),
            new State("b", "SPLIT_DISTRIBUTE", 3, 0),
            new State("c", "SPLIT_DISTRIBUTE", 1, 1)),
        // Mixed modes: UNION and BROADCAST do not move the SPLIT start.
        new Case(4, 3,
            new State("offsets", "SPLIT_DISTRIBUTE", 3, 1, 0, 2),
            new State("u", "UNION", 1, 0, 0, 2),
            new State("pending", "SPLIT_DISTRIBUTE", 1, 1, 1, 1),
            new State("rules", "BROADCAST", 2, 2, 2, 2),
            new State("txn", "SPLIT_DISTRIBUTE", 0, 0, 0, 5)),
        // Scale down with uneven partitions.
        new Case(6, 4,
            new State("x", "SPLIT_DISTRIBUTE", 7, 0, 3, 9, 1, 4),
            new State("y", "SPLIT_DISTRIBUTE", 2, 2, 2, 2, 2, 3),
            new State("z", "SPLIT_DISTRIBUTE", 0, 0, 0, 0, 0, 1)),
        // Empty SPLIT states take part in the rotation with zero elements.
        new Case(2, 3,
            new State("a", "SPLIT_DISTRIBUTE", 0, 0),
            new State("b", "SPLIT_DISTRIBUTE", 1, 1),
            new State("c", "SPLIT_DISTRIBUTE", 1, 0)),
        // Unchanged parallelism: everything stays in place, no rotation.
        new Case(3, 3,
            new State("a", "SPLIT_DISTRIBUTE", 3, 0, 1),
            new State("b", "SPLIT_DISTRIBUTE", 0, 2, 0),
            new State("u", "UNION", 1, 1, 0),
            new State("r", "BROADCAST", 1, 1, 1)),
        // Scale up past the element count.
        new Case(2, 7,
            new State("p", "SPLIT_DISTRIBUTE", 2, 1),
            new State("q", "SPLIT_DISTRIBUTE", 1, 1),
            new State("r", "SPLIT_DISTRIBUTE", 4, 0)),
    };

    public static void main(String[] args) {
        StringBuilder out = new StringBuilder();
        out.append("{\n");
        out.append(" \"source\": ").append(jsonString(
                "Computed by spec/vectors/tools/MultiSplitVectors.java (Java "
                + System.getProperty("java.version") + "): a transcription of Flink's "
                + "RoundRobinOperatorStateRepartitioner (repartitionSplitState loop, union and broadcast "
                + "rules, unchanged-parallelism shortcut) that visits SPLIT_DISTRIBUTE states in ascending "
                + "order of the UTF-8 bytes of their names (this spec's rule), not in Java HashMap order"))
                .append(",\n");
        out.append(" \"note\": ").append(jsonString(
                "assignment[state][new_subtask] = sorted list of [old_subtask, element_index]; "
                + "split_state_order lists the SPLIT_DISTRIBUTE states in the order they were visited"))
                .append(",\n");
        out.append(" \"cases\": [\n");
        for (int ci = 0; ci < CASES.length; ci++) {
            Case c = CASES[ci];
            out.append("  {\n");
            out.append("   \"old_parallelism\": ").append(c.oldParallelism).append(",\n");
            out.append("   \"new_parallelism\": ").append(c.newParallelism).append(",\n");
            out.append("   \"states\": [\n");
            for (int si = 0; si < c.states.length; si++) {
                State s = c.states[si];
                out.append("    {\"name\": ").append(jsonString(s.name))
                        .append(", \"mode\": ").append(jsonString(s.mode))
                        .append(", \"elements_per_old_subtask\": ").append(ints(s.counts)).append("}")
                        .append(si + 1 < c.states.length ? ",\n" : "\n");
            }
            out.append("   ],\n");
            List<String> order = new ArrayList<>();
            for (String name : splitOrder(c)) {
                order.add(jsonString(name));
            }
            out.append("   \"split_state_order\": [").append(String.join(", ", order)).append("],\n");
            out.append("   \"assignment\": {\n");
            Map<String, List<List<int[]>>> result = repartition(c);
            int si = 0;
            for (Map.Entry<String, List<List<int[]>>> e : result.entrySet()) {
                out.append("    ").append(jsonString(e.getKey())).append(": {\n");
                List<List<int[]>> perSubtask = e.getValue();
                for (int i = 0; i < perSubtask.size(); i++) {
                    List<int[]> elements = new ArrayList<>(perSubtask.get(i));
                    elements.sort(Comparator.<int[]>comparingInt(x -> x[0]).thenComparingInt(x -> x[1]));
                    List<String> parts = new ArrayList<>();
                    for (int[] el : elements) {
                        parts.add(ints(el));
                    }
                    out.append("     \"").append(i).append("\": [").append(String.join(", ", parts)).append("]")
                            .append(i + 1 < perSubtask.size() ? ",\n" : "\n");
                }
                out.append("    }").append(++si < result.size() ? ",\n" : "\n");
            }
            out.append("   }\n");
            out.append("  }").append(ci + 1 < CASES.length ? ",\n" : "\n");
        }
        out.append(" ]\n");
        out.append("}\n");
        System.out.print(out);
    }
}
