#include <cstdlib>
#include <iostream>

int main() {
    long long a, b;
    std::cin >> a >> b;
    std::cout << std::llabs(a) + std::llabs(b) << "\n";
}
