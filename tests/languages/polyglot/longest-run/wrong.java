import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt(), best = 1, run = 1;
        long prev = in.nextLong();
        for (int i = 1; i < n; i++) {
            long x = in.nextLong();
            run = x >= prev ? run + 1 : 1;
            best = Math.max(best, run);
            prev = x;
        }
        System.out.println(best);
    }
}
