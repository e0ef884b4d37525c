import java.io.*;

public class Main {
    public static void main(String[] args) throws IOException {
        String s = new BufferedReader(new InputStreamReader(System.in)).readLine().trim();
        boolean ok = s.equalsIgnoreCase(new StringBuilder(s).reverse().toString());
        System.out.println(ok ? "YES" : "NO");
    }
}
