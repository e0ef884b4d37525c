#include <stdio.h>
#include <stdlib.h>

static int desc(const void *a, const void *b) { return *(const int *)b - *(const int *)a; }

int main(void) {
    int n, amount, coins[10], count = 0;
    scanf("%d %d", &n, &amount);
    for (int i = 0; i < n; i++) scanf("%d", &coins[i]);
    qsort(coins, n, sizeof coins[0], desc);
    for (int i = 0; i < n; i++) {
        count += amount / coins[i];
        amount %= coins[i];
    }
    printf("%d\n", amount == 0 ? count : -1);
    return 0;
}
