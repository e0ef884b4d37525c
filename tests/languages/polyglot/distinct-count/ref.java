import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt();
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < n; i++) seen.add(in.nextLong());
        System.out.println(seen.size());
    }
}
