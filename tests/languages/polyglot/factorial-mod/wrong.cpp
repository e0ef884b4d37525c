#include <iostream>

int main() {
    long long n, result = 1;
    std::cin >> n;
    for (long long i = 1; i < n; i++) result = result * i % 1000000007LL;
    std::cout << result << "\n";
}
