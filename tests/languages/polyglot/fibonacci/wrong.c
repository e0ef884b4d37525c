#include <stdio.h>

int main(void) {
    int n;
    long long a = 1, b = 1, t;
    scanf("%d", &n);
    for (int i = 0; i < n; i++) {
        t = a + b;
        a = b;
        b = t;
    }
    printf("%lld\n", a);
    return 0;
}
