import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt();
        long total = 0;
        StringJoiner out = new StringJoiner(" ");
        for (int i = 0; i < n; i++) {
            long x = in.nextLong();
            total += x;
            out.add(Long.toString(total));
        }
        System.out.println(out);
    }
}
