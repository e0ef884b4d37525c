#include <bits/stdc++.h>
using namespace std;

int main() {
    string s, out;
    cin >> s;
    int run = 1;
    for (size_t i = 1; i < s.size(); i++) {
        if (s[i] == s[i - 1]) run++;
        else {
            out += s[i - 1] + to_string(run);
            run = 1;
        }
    }
    cout << out << "\n";
}
