#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    cin >> n;
    vector<long long> v(n);
    for (auto &x : v) cin >> x;
    sort(v.rbegin(), v.rend());
    if (n < 2) cout << "NONE\n";
    else cout << v[1] << "\n";
}
