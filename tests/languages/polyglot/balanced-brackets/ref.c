#include <stdio.h>

int main(void) {
    static char s[2048], stack[2048];
    int top = 0, ok = 1;
    scanf("%2047s", s);
    for (char *p = s; *p && ok; p++) {
        char c = *p;
        if (c == '(' || c == '[' || c == '{') stack[top++] = c;
        else {
            char want = c == ')' ? '(' : c == ']' ? '[' : '{';
            if (top == 0 || stack[--top] != want) ok = 0;
        }
    }
    puts(ok && top == 0 ? "YES" : "NO");
    return 0;
}
