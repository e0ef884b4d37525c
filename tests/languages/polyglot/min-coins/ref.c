#include <stdio.h>

int main(void) {
    int n, amount, coins[10], best[1001];
    scanf("%d %d", &n, &amount);
    for (int i = 0; i < n; i++) scanf("%d", &coins[i]);
    best[0] = 0;
    for (int a = 1; a <= amount; a++) {
        best[a] = -1;
        for (int i = 0; i < n; i++) {
            int c = coins[i];
            if (c <= a && best[a - c] >= 0 && (best[a] < 0 || best[a - c] + 1 < best[a]))
                best[a] = best[a - c] + 1;
        }
    }
    printf("%d\n", best[amount]);
    return 0;
}
