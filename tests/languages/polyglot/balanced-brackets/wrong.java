import java.io.*;

public class Main {
    public static void main(String[] args) throws IOException {
        String s = new BufferedReader(new InputStreamReader(System.in)).readLine().trim();
        int[] depth = new int[3];
        boolean ok = true;
        for (char c : s.toCharArray()) {
            int open = "([{".indexOf(c), close = ")]}".indexOf(c);
            if (open >= 0) depth[open]++;
            else if (--depth[close] < 0) ok = false;
        }
        System.out.println(ok && depth[0] == 0 && depth[1] == 0 && depth[2] == 0 ? "YES" : "NO");
    }
}
