import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int t = in.nextInt();
        while (t-- > 0) {
            int y = in.nextInt();
            System.out.println(y % 4 == 0 && y % 100 != 0 ? "YES" : "NO");
        }
    }
}
