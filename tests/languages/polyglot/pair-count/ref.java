import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt();
        long target = in.nextLong(), count = 0;
        long[] a = new long[n];
        for (int i = 0; i < n; i++) a[i] = in.nextLong();
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                if (a[i] + a[j] == target) count++;
        System.out.println(count);
    }
}
