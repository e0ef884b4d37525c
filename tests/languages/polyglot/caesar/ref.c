#include <stdio.h>
#include <string.h>

int main(void) {
    int k;
    static char line[2048];
    scanf("%d ", &k);
    if (!fgets(line, sizeof line, stdin)) return 1;
    line[strcspn(line, "\r\n")] = 0;
    for (char *p = line; *p; p++) {
        int c = *p;
        if (c != ' ') *p = (char)((c - 'a' + k) % 26 + 'a');
    }
    puts(line);
    return 0;
}
