import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        long[] s = {in.nextLong(), in.nextLong(), in.nextLong()};
        Arrays.sort(s);
        if (s[0] + s[1] <= s[2]) System.out.println("invalid");
        else if (s[0] == s[2]) System.out.println("equilateral");
        else if (s[0] == s[1] || s[1] == s[2]) System.out.println("isosceles");
        else System.out.println("scalene");
    }
}
