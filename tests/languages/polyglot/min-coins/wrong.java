import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt(), amount = in.nextInt(), count = 0;
        Integer[] coins = new Integer[n];
        for (int i = 0; i < n; i++) coins[i] = in.nextInt();
        Arrays.sort(coins, Collections.reverseOrder());
        for (int c : coins) {
            count += amount / c;
            amount %= c;
        }
        System.out.println(amount == 0 ? count : -1);
    }
}
