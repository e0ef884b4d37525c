#include <stdio.h>

int main(void) {
    int n;
    long long target, a[200], count = 0;
    scanf("%d %lld", &n, &target);
    for (int i = 0; i < n; i++) scanf("%lld", &a[i]);
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++)
            if (a[i] + a[j] == target) count++;
    printf("%lld\n", count);
    return 0;
}
