#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    cin >> n;
    set<long long, greater<long long>> values;
    for (int i = 0; i < n; i++) {
        long long x;
        cin >> x;
        values.insert(x);
    }
    if (values.size() < 2) cout << "NONE\n";
    else cout << *next(values.begin()) << "\n";
}
