#include <stdio.h>
#include <string.h>

int main(void) {
    int c, count = 0;
    while ((c = getchar()) != EOF && c != '\n')
        if (strchr("aeiouAEIOU", c)) count++;
    printf("%d\n", count);
    return 0;
}
