#include <stdio.h>
#include <string.h>

int main(void) {
    static char line[4096];
    if (!fgets(line, sizeof line, stdin)) return 0;
    int len = (int)strcspn(line, "\r\n");
    for (int i = len - 1; i >= 0; i--) putchar(line[i]);
    putchar('\n');
    return 0;
}
