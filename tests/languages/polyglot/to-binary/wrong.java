import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        long n = new Scanner(System.in).nextLong();
        StringBuilder d = new StringBuilder();
        while (n > 0) {
            d.append(n % 2);
            n /= 2;
        }
        System.out.println(d.reverse());
    }
}
