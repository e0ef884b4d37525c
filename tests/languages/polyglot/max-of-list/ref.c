#include <stdio.h>

int main(void) {
    int n;
    long long x, best;
    scanf("%d", &n);
    scanf("%lld", &best);
    for (int i = 1; i < n; i++) {
        scanf("%lld", &x);
        if (x > best) best = x;
    }
    printf("%lld\n", best);
    return 0;
}
