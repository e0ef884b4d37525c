#include <stdio.h>
#include <string.h>

int main(void) {
    static char s[2048];
    scanf("%2047s", s);
    int n = (int)strlen(s) - 1, sum = 0;
    for (int i = 0; i < n; i++) sum += s[i] - '0';
    printf("%d\n", sum);
    return 0;
}
