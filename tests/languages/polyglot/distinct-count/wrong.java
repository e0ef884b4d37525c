import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt(), count = 0;
        long prev = 0;
        for (int i = 0; i < n; i++) {
            long x = in.nextLong();
            if (i == 0 || x != prev) count++;
            prev = x;
        }
        System.out.println(count);
    }
}
