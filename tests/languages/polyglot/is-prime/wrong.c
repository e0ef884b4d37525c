#include <stdio.h>

int is_prime(long long n) {
    if (n < 1) return 0;
    for (long long d = 2; d * d <= n; d++)
        if (n % d == 0) return 0;
    return 1;
}

int main(void) {
    int t;
    long long n;
    scanf("%d", &t);
    while (t--) {
        scanf("%lld", &n);
        puts(is_prime(n) ? "YES" : "NO");
    }
    return 0;
}
