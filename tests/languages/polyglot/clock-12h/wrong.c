#include <stdio.h>

int main(void) {
    int h, m;
    scanf("%d:%d", &h, &m);
    printf("%d:%02d %s\n", h <= 12 ? h : h - 12, m, h < 12 ? "AM" : "PM");
    return 0;
}
