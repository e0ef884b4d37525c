#include <cstdio>

int main() {
    int h, m;
    if (std::scanf("%d:%d", &h, &m) != 2) return 1;
    std::printf("%d:%02d %s\n", (h + 11) % 12 + 1, m, h < 12 ? "AM" : "PM");
}
