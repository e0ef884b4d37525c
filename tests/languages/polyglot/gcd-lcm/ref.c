#include <stdio.h>

long long gcd(long long a, long long b) { return b ? gcd(b, a % b) : a; }

int main(void) {
    long long a, b;
    scanf("%lld %lld", &a, &b);
    long long g = gcd(a, b);
    printf("%lld %lld\n", g, a / g * b);
    return 0;
}
