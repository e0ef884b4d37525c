#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    long long target, count = 0;
    cin >> n >> target;
    vector<long long> a(n);
    for (auto &x : a) cin >> x;
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++)
            if (a[i] + a[j] == target) count++;
    cout << count << "\n";
}
