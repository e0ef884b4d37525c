#include <stdio.h>

int main(void) {
    char a[128], b[128];
    int count[26] = {0}, ok = 1;
    scanf("%127s %127s", a, b);
    for (char *p = a; *p; p++) count[*p - 'a']++;
    for (char *p = b; *p; p++) count[*p - 'a']--;
    for (int i = 0; i < 26; i++)
        if (count[i]) ok = 0;
    puts(ok ? "YES" : "NO");
    return 0;
}
