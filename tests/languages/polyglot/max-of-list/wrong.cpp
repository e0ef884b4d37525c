#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    cin >> n;
    long long best = 0, x;
    for (int i = 0; i < n; i++) {
        cin >> x;
        best = max(best, x);
    }
    cout << best << "\n";
}
