#include <bits/stdc++.h>
using namespace std;

int main() {
    string a, b;
    cin >> a >> b;
    set<char> sa(a.begin(), a.end()), sb(b.begin(), b.end());
    cout << (a.size() == b.size() && sa == sb ? "YES" : "NO") << "\n";
}
