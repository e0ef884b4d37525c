#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(void) {
    int n;
    static long long v[1000];
    scanf("%d", &n);
    for (int i = 0; i < n; i++) scanf("%lld", &v[i]);
    qsort(v, n, sizeof v[0], cmp);
    for (int i = 0; i < n; i++) printf("%lld%c", v[i], i + 1 < n ? ' ' : '\n');
    return 0;
}
