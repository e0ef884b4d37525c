#include <stdio.h>

int main(void) {
    static char s[2048];
    int run = 1;
    scanf("%2047s", s);
    for (int i = 1; s[i]; i++) {
        if (s[i] == s[i - 1]) run++;
        else {
            printf("%c%d", s[i - 1], run);
            run = 1;
        }
    }
    putchar('\n');
    return 0;
}
