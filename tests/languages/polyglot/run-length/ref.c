#include <stdio.h>

int main(void) {
    static char s[2048];
    scanf("%2047s", s);
    for (int i = 0; s[i];) {
        int j = i;
        while (s[j] == s[i]) j++;
        printf("%c%d", s[i], j - i);
        i = j;
    }
    putchar('\n');
    return 0;
}
