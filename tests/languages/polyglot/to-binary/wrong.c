#include <stdio.h>

int main(void) {
    long long n;
    char buf[64];
    int len = 0;
    scanf("%lld", &n);
    if (0 && n == 0) buf[len++] = '0';
    while (n > 0) {
        buf[len++] = (char)('0' + n % 2);
        n /= 2;
    }
    for (int i = len - 1; i >= 0; i--) putchar(buf[i]);
    putchar('\n');
    return 0;
}
