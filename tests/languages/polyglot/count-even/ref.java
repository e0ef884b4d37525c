import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt(), count = 0;
        for (int i = 0; i < n; i++) if (in.nextLong() % 2 == 0) count++;
        System.out.println(count);
    }
}
