import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        long a = in.nextLong(), b = in.nextLong(), m = in.nextLong();
        long result = 1 % m, base = a % m;
        for (; b > 0; b >>= 1) {
            if ((b & 1) == 1) result = result * base % m;
            base = base * base % m;
        }
        System.out.println(result);
    }
}
