#include <stdio.h>
#include <string.h>

int main(void) {
    static char words[1000][16];
    static int counts[1000];
    int distinct = 0;
    char w[16];
    while (scanf("%15s", w) == 1) {
        int i = 0;
        while (i < distinct && strcmp(words[i], w) != 0) i++;
        if (i == distinct) strcpy(words[distinct++], w);
        counts[i]++;
    }
    int best = 0;
    for (int i = 1; i < distinct; i++)
        if (counts[i] > counts[best]) best = i;
    puts(words[best]);
    return 0;
}
