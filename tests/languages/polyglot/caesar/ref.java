import java.io.*;

public class Main {
    public static void main(String[] args) throws IOException {
        BufferedReader br = new BufferedReader(new InputStreamReader(System.in));
        int k = Integer.parseInt(br.readLine().trim());
        char[] line = br.readLine().toCharArray();
        for (int i = 0; i < line.length; i++) {
            int c = line[i];
            if (c != ' ') line[i] = (char) ((c - 'a' + k) % 26 + 'a');
        }
        System.out.println(new String(line));
    }
}
