#include <stdio.h>

int main(void) {
    long long n, result = 1;
    scanf("%lld", &n);
    for (long long i = 1; i <= n; i++) result = result * i % 1000000007LL;
    printf("%lld\n", result);
    return 0;
}
