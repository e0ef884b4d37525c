import java.io.*;
import java.util.*;

public class Main {
    public static void main(String[] args) throws IOException {
        BufferedReader br = new BufferedReader(new InputStreamReader(System.in));
        int n = Integer.parseInt(br.readLine().trim());
        StringTokenizer st = new StringTokenizer(br.readLine());
        long best = Long.MIN_VALUE;
        for (int i = 0; i < n; i++) best = Math.max(best, Long.parseLong(st.nextToken()));
        System.out.println(best);
    }
}
