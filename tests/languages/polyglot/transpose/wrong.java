import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int r = in.nextInt(), c = in.nextInt();
        int[][] a = new int[r][c];
        for (int i = 0; i < r; i++) for (int j = 0; j < c; j++) a[i][j] = in.nextInt();
        StringBuilder out = new StringBuilder();
        for (int j = 0; j < r; j++) {
            for (int i = 0; i < c; i++) out.append(a[j][i]).append(i + 1 < c ? ' ' : '\n');
        }
        System.out.print(out);
    }
}
