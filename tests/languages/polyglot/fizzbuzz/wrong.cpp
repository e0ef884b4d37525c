#include <iostream>

int main() {
    int n;
    std::cin >> n;
    for (int i = 1; i <= n; i++) {
        if (i % 3 == 0) std::cout << "Fizz\n";
        else if (i % 5 == 0) std::cout << "Buzz\n";
        else if (i % 15 == 0) std::cout << "FizzBuzz\n";
        else std::cout << i << "\n";
    }
}
