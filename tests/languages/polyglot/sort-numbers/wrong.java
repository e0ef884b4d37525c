import java.io.*;
import java.util.*;

public class Main {
    public static void main(String[] args) throws IOException {
        BufferedReader br = new BufferedReader(new InputStreamReader(System.in));
        int n = Integer.parseInt(br.readLine().trim());
        String[] v = br.readLine().trim().split(" +");
        Arrays.sort(v);
        System.out.println(String.join(" ", v));
    }
}
