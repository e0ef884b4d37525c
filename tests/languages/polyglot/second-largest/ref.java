import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt();
        TreeSet<Long> values = new TreeSet<>();
        for (int i = 0; i < n; i++) values.add(in.nextLong());
        if (values.size() < 2) System.out.println("NONE");
        else System.out.println(values.lower(values.last()));
    }
}
