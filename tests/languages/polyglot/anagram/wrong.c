#include <stdio.h>
#include <string.h>

int main(void) {
    char a[128], b[128];
    int in_a[26] = {0}, in_b[26] = {0}, ok;
    scanf("%127s %127s", a, b);
    for (char *p = a; *p; p++) in_a[*p - 'a'] = 1;
    for (char *p = b; *p; p++) in_b[*p - 'a'] = 1;
    ok = strlen(a) == strlen(b) && memcmp(in_a, in_b, sizeof in_a) == 0;
    puts(ok ? "YES" : "NO");
    return 0;
}
