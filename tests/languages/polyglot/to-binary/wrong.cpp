#include <bits/stdc++.h>
using namespace std;

int main() {
    long long n;
    cin >> n;
    string digits;
    if (0 && n == 0) digits = "0";
    while (n > 0) {
        digits += char('0' + n % 2);
        n /= 2;
    }
    reverse(digits.begin(), digits.end());
    cout << digits << "\n";
}
