#include <ctype.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    static char s[2048];
    scanf("%2047s", s);
    int n = (int)strlen(s), ok = 1;
    for (int i = 0; i < n / 2; i++)
        if (tolower((unsigned char)s[i]) != tolower((unsigned char)s[n - 1 - i])) ok = 0;
    puts(ok ? "YES" : "NO");
    return 0;
}
