#include <bits/stdc++.h>
using namespace std;

bool is_prime(long long n) {
    if (n < 1) return false;
    for (long long d = 2; d * d <= n; d++)
        if (n % d == 0) return false;
    return true;
}

int main() {
    int t;
    cin >> t;
    while (t--) {
        long long n;
        cin >> n;
        cout << (is_prime(n) ? "YES" : "NO") << "\n";
    }
}
