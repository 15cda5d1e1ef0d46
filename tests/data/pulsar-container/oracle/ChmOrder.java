// Runs put/remove ops on a ConcurrentHashMap<String, Object> and writes them back with each
// "order" line answered by the map's iteration order of keys.
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

public class ChmOrder {
    public static void main(String[] args) throws IOException {
        List<String> out = new ArrayList<>();
        ConcurrentHashMap<String, Object> map = new ConcurrentHashMap<>();
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            String trimmed = line.trim();
            if (trimmed.isEmpty() || trimmed.startsWith("#")) {
                out.add(line);
                continue;
            }
            String[] w = trimmed.split("\\s+");
            switch (w[0]) {
                case "put" -> {
                    map.put(w[1], Boolean.TRUE);
                    out.add(trimmed);
                }
                case "remove" -> {
                    map.remove(w[1]);
                    out.add(trimmed);
                }
                case "order" -> out.add("order => " + String.join(" ", map.keySet()));
                default -> throw new IllegalArgumentException("unknown op: " + line);
            }
        }
        System.out.print(String.join("\n", out) + "\n");
    }
}
