import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt(), amount = in.nextInt();
        int[] coins = new int[n];
        for (int i = 0; i < n; i++) coins[i] = in.nextInt();
        int inf = Integer.MAX_VALUE / 2;
        int[] best = new int[amount + 1];
        Arrays.fill(best, inf);
        best[0] = 0;
        for (int a = 1; a <= amount; a++)
            for (int c : coins)
                if (c <= a) best[a] = Math.min(best[a], best[a - c] + 1);
        System.out.println(best[amount] >= inf ? -1 : best[amount]);
    }
}
