#include <cstdio>

int main() {
    int h, m;
    if (std::scanf("%d:%d", &h, &m) != 2) return 1;
    std::printf("%d:%02d %s\n", h <= 12 ? h : h - 12, m, h < 12 ? "AM" : "PM");
}
