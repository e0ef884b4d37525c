#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(void) {
    long long s[3];
    scanf("%lld %lld %lld", &s[0], &s[1], &s[2]);
    qsort(s, 3, sizeof s[0], cmp);
    if (s[0] == s[2]) puts("equilateral");
    else if (s[0] == s[1] || s[1] == s[2]) puts("isosceles");
    else puts("scalene");
    return 0;
}
