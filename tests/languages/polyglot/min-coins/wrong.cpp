#include <bits/stdc++.h>
using namespace std;

int main() {
    int n, amount, count = 0;
    cin >> n >> amount;
    vector<int> coins(n);
    for (auto &c : coins) cin >> c;
    sort(coins.rbegin(), coins.rend());
    for (int c : coins) {
        count += amount / c;
        amount %= c;
    }
    cout << (amount == 0 ? count : -1) << "\n";
}
