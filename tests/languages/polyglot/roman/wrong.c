#include <stdio.h>

int main(void) {
    int n;
    const int values[] = {1000, 500, 100, 50, 10, 5, 1};
    const char *symbols[] = {"M", "D", "C", "L", "X", "V", "I"};
    scanf("%d", &n);
    for (int i = 0; i < 7; i++)
        while (n >= values[i]) {
            fputs(symbols[i], stdout);
            n -= values[i];
        }
    putchar('\n');
    return 0;
}
