import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        String a = in.next(), b = in.next();
        Set<Character> sa = new HashSet<>(), sb = new HashSet<>();
        for (char c : a.toCharArray()) sa.add(c);
        for (char c : b.toCharArray()) sb.add(c);
        System.out.println(a.length() == b.length() && sa.equals(sb) ? "YES" : "NO");
    }
}
