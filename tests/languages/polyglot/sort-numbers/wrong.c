#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

int main(void) {
    int n;
    static char v[1000][16];
    scanf("%d", &n);
    for (int i = 0; i < n; i++) scanf("%15s", v[i]);
    qsort(v, n, sizeof v[0], cmp);
    for (int i = 0; i < n; i++) printf("%s%c", v[i], i + 1 < n ? ' ' : '\n');
    return 0;
}
