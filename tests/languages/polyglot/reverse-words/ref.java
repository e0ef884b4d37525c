import java.io.*;
import java.util.*;

public class Main {
    public static void main(String[] args) throws IOException {
        BufferedReader br = new BufferedReader(new InputStreamReader(System.in));
        List<String> words = new ArrayList<>(Arrays.asList(br.readLine().trim().split(" +")));
        Collections.reverse(words);
        System.out.println(String.join(" ", words));
    }
}
