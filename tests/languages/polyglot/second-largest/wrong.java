import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt();
        long[] v = new long[n];
        for (int i = 0; i < n; i++) v[i] = in.nextLong();
        Arrays.sort(v);
        if (n < 2) System.out.println("NONE");
        else System.out.println(v[n - 2]);
    }
}
