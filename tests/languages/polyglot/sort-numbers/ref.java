import java.io.*;
import java.util.*;

public class Main {
    public static void main(String[] args) throws IOException {
        BufferedReader br = new BufferedReader(new InputStreamReader(System.in));
        int n = Integer.parseInt(br.readLine().trim());
        StringTokenizer st = new StringTokenizer(br.readLine());
        long[] v = new long[n];
        for (int i = 0; i < n; i++) v[i] = Long.parseLong(st.nextToken());
        Arrays.sort(v);
        StringJoiner out = new StringJoiner(" ");
        for (long x : v) out.add(Long.toString(x));
        System.out.println(out);
    }
}
