import java.io.*;
import java.util.*;

public class Main {
    public static void main(String[] args) throws IOException {
        String line = new BufferedReader(new InputStreamReader(System.in)).readLine().trim();
        TreeMap<String, Integer> counts = new TreeMap<>();
        for (String w : line.split(" +")) counts.merge(w, 1, Integer::sum);
        String best = null;
        for (Map.Entry<String, Integer> e : counts.entrySet())
            if (best == null || e.getValue() > counts.get(best)) best = e.getKey();
        System.out.println(best);
    }
}
