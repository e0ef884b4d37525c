import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        long n = new Scanner(System.in).nextLong(), result = 1;
        for (long i = 1; i <= n; i++) result = result * i % 1000000007L;
        System.out.println(result);
    }
}
