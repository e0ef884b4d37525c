#include <stdio.h>

int main(void) {
    int n;
    long long x, best = 0;
    scanf("%d", &n);
    for (int i = 0; i < n; i++) {
        scanf("%lld", &x);
        if (x > best) best = x;
    }
    printf("%lld\n", best);
    return 0;
}
