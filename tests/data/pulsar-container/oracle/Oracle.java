// Runs an op sequence through Pulsar's ActiveManagedCursorContainerImpl and writes it back with
// each query's answer after "=>". Also counts the answers that differ from the exact count (the
// tracked cursors at or before the cursor), for the fixture's header.
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.bookkeeper.mledger.ManagedCursor;
import org.apache.bookkeeper.mledger.Position;
import org.apache.bookkeeper.mledger.impl.ActiveManagedCursorContainerImpl;

public class Oracle {
    record Cursor(String name) implements ManagedCursor {
        public String getName() {
            return name;
        }
    }

    static Position position(String s) {
        if (s.equals("null")) {
            return null;
        }
        String[] parts = s.split(":");
        return new Position(Long.parseLong(parts[0]), Long.parseLong(parts[1]));
    }

    public static void main(String[] args) throws IOException {
        List<String> out = new ArrayList<>();
        ActiveManagedCursorContainerImpl c = new ActiveManagedCursorContainerImpl();
        Map<String, Cursor> cursors = new HashMap<>();
        Map<String, Position> exact = new HashMap<>();
        int queries = 0;
        int differing = 0;
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            String trimmed = line.trim();
            if (trimmed.isEmpty() || trimmed.startsWith("#")) {
                out.add(line);
                continue;
            }
            String[] w = trimmed.split("\\s+");
            String answer = null;
            switch (w[0]) {
                case "add" -> {
                    Position p = position(w[2]);
                    c.add(cursors.computeIfAbsent(w[1], Cursor::new), p);
                    if (p == null) {
                        exact.remove(w[1]);
                    } else {
                        exact.put(w[1], p);
                    }
                }
                case "update" -> {
                    Position p = position(w[2]);
                    boolean known = c.get(w[1]) != null;
                    c.updateCursor(cursors.computeIfAbsent(w[1], Cursor::new), p);
                    if (known) {
                        if (p == null) {
                            exact.remove(w[1]);
                        } else {
                            exact.put(w[1], p);
                        }
                    }
                }
                case "remove" -> {
                    c.removeCursor(w[1]);
                    exact.remove(w[1]);
                }
                case "count" -> {
                    int got = c.getNumberOfCursorsAtSamePositionOrBefore(cursors.computeIfAbsent(w[1], Cursor::new));
                    Position p = exact.get(w[1]);
                    long want = p == null ? 0 : exact.values().stream().filter(q -> q.compareTo(p) <= 0).count();
                    queries++;
                    if (got != want) {
                        differing++;
                    }
                    answer = Integer.toString(got);
                }
                case "slowest" -> {
                    Position p = c.getSlowestCursorPosition();
                    answer = p == null ? "null" : p.toString();
                }
                case "size" -> answer = Integer.toString(c.size());
                default -> throw new IllegalArgumentException("unknown op: " + line);
            }
            out.add(answer == null ? String.join(" ", w) : String.join(" ", w) + " => " + answer);
        }
        out.add(0, "# answers differing from the exact count: " + differing + " of " + queries + " counts");
        System.out.print(String.join("\n", out) + "\n");
    }
}
