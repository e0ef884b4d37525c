#include <stdio.h>

int main(void) {
    long long a, b, m;
    scanf("%lld %lld %lld", &a, &b, &m);
    long long result = 1 % m, base = a % m;
    while (b > 0) {
        if (b & 1) result = result * base % m;
        base = base * base % m;
        b >>= 1;
    }
    printf("%lld\n", result);
    return 0;
}
