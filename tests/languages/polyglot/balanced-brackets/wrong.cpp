#include <bits/stdc++.h>
using namespace std;

int main() {
    string s;
    cin >> s;
    map<char, int> depth;
    map<char, char> open = {{')', '('}, {']', '['}, {'}', '{'}};
    bool ok = true;
    for (char c : s) {
        if (open.count(c)) {
            if (--depth[open[c]] < 0) ok = false;
        } else depth[c]++;
    }
    for (auto &[k, v] : depth) if (v) ok = false;
    cout << (ok ? "YES" : "NO") << "\n";
}
