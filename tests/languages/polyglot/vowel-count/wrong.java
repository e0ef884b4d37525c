import java.io.*;

public class Main {
    public static void main(String[] args) throws IOException {
        String line = new BufferedReader(new InputStreamReader(System.in)).readLine();
        int count = 0;
        for (char c : line.toCharArray()) if ("aeiou".indexOf(c) >= 0) count++;
        System.out.println(count);
    }
}
