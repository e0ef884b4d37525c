#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    cin >> n;
    vector<long long> v(n);
    for (auto &x : v) cin >> x;
    int best = 1, run = 1;
    for (int i = 1; i < n; i++) {
        run = v[i] >= v[i - 1] ? run + 1 : 1;
        best = max(best, run);
    }
    cout << best << "\n";
}
