#include <bits/stdc++.h>
using namespace std;

int main() {
    string s;
    cin >> s;
    map<char, char> want = {{')', '('}, {']', '['}, {'}', '{'}};
    vector<char> st;
    bool ok = true;
    for (char c : s) {
        if (c == '(' || c == '[' || c == '{') st.push_back(c);
        else if (st.empty() || st.back() != want[c]) { ok = false; break; }
        else st.pop_back();
    }
    cout << (ok && st.empty() ? "YES" : "NO") << "\n";
}
