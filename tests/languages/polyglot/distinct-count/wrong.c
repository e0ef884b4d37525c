#include <stdio.h>

int main(void) {
    int n, count = 0;
    static long long v[1000];
    scanf("%d", &n);
    for (int i = 0; i < n; i++) scanf("%lld", &v[i]);
    for (int i = 0; i < n; i++)
        if (i == 0 || v[i] != v[i - 1]) count++;
    printf("%d\n", count);
    return 0;
}
