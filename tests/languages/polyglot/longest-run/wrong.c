#include <stdio.h>

int main(void) {
    int n, best = 1, run = 1;
    long long prev, x;
    scanf("%d %lld", &n, &prev);
    for (int i = 1; i < n; i++) {
        scanf("%lld", &x);
        run = x >= prev ? run + 1 : 1;
        if (run > best) best = run;
        prev = x;
    }
    printf("%d\n", best);
    return 0;
}
