#include <iostream>

int main() {
    int t, y;
    std::cin >> t;
    while (t--) {
        std::cin >> y;
        std::cout << (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) ? "YES" : "NO") << "\n";
    }
}
