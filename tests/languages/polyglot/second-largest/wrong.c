#include <stdio.h>

int main(void) {
    int n, have1 = 0, have2 = 0;
    long long x, first = 0, second = 0;
    scanf("%d", &n);
    for (int i = 0; i < n; i++) {
        scanf("%lld", &x);
        if (!have1 || x >= first) {
            if (have1) { second = first; have2 = 1; }
            first = x;
            have1 = 1;
        } else if (!have2 || x > second) {
            second = x;
            have2 = 1;
        }
    }
    if (have2) printf("%lld\n", second);
    else puts("NONE");
    return 0;
}
