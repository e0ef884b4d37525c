#include <bits/stdc++.h>
using namespace std;

int main() {
    string s;
    cin >> s;
    for (auto &c : s) c = tolower(c);
    string r(s.rbegin(), s.rend());
    cout << (s == r ? "YES" : "NO") << "\n";
}
