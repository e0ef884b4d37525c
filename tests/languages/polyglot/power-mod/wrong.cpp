#include <iostream>

int main() {
    long long a, b, m;
    std::cin >> a >> b >> m;
    long long result = 1, base = a % m;
    for (; b > 0; b >>= 1) {
        if (b & 1) result = result * base % m;
        base = base * base % m;
    }
    std::cout << result << "\n";
}
