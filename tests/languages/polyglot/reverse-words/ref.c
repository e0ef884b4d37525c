#include <stdio.h>
#include <string.h>

int main(void) {
    static char words[100][32];
    int n = 0;
    while (n < 100 && scanf("%31s", words[n]) == 1) n++;
    for (int i = n - 1; i >= 0; i--) printf("%s%s", words[i], i ? " " : "\n");
    return 0;
}
