#include <stdio.h>

int main(void) {
    int n, count = 0;
    long long x;
    scanf("%d", &n);
    for (int i = 0; i < n; i++) {
        scanf("%lld", &x);
        if (x > 0 && x % 2 == 0) count++;
    }
    printf("%d\n", count);
    return 0;
}
