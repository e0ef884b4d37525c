#include <stdio.h>

int main(void) {
    int n;
    long long x, total = 0;
    scanf("%d", &n);
    for (int i = 0; i < n; i++) {
        scanf("%lld", &x);
        total += x;
        printf("%lld%c", total, i + 1 < n ? ' ' : '\n');
    }
    return 0;
}
