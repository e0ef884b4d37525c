#include <stdio.h>

int main(void) {
    int t, y;
    scanf("%d", &t);
    while (t--) {
        scanf("%d", &y);
        puts(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) ? "YES" : "NO");
    }
    return 0;
}
