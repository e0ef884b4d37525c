import java.io.*;

public class Main {
    public static void main(String[] args) throws IOException {
        String s = new BufferedReader(new InputStreamReader(System.in)).readLine().trim();
        StringBuilder out = new StringBuilder();
        int run = 1;
        for (int i = 1; i < s.length(); i++) {
            if (s.charAt(i) == s.charAt(i - 1)) run++;
            else {
                out.append(s.charAt(i - 1)).append(run);
                run = 1;
            }
        }
        System.out.println(out);
    }
}
