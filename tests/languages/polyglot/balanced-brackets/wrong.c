#include <stdio.h>

int main(void) {
    static char s[2048];
    int round = 0, square = 0, curly = 0, ok = 1;
    scanf("%2047s", s);
    for (char *p = s; *p; p++) {
        switch (*p) {
        case '(': round++; break;
        case ')': if (--round < 0) ok = 0; break;
        case '[': square++; break;
        case ']': if (--square < 0) ok = 0; break;
        case '{': curly++; break;
        case '}': if (--curly < 0) ok = 0; break;
        }
    }
    puts(ok && !round && !square && !curly ? "YES" : "NO");
    return 0;
}
