#include <iostream>

int main() {
    long long n;
    std::cin >> n;
    int steps = 1;
    while (n != 1) {
        n = n % 2 == 0 ? n / 2 : 3 * n + 1;
        steps++;
    }
    std::cout << steps << "\n";
}
