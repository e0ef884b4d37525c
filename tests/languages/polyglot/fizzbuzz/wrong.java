import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        int n = new Scanner(System.in).nextInt();
        StringBuilder out = new StringBuilder();
        for (int i = 1; i <= n; i++) {
            if (i % 3 == 0) out.append("Fizz\n");
            else if (i % 5 == 0) out.append("Buzz\n");
            else if (i % 15 == 0) out.append("FizzBuzz\n");
            else out.append(i).append('\n');
        }
        System.out.print(out);
    }
}
