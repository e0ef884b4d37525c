#include <bits/stdc++.h>
using namespace std;

int main() {
    array<long long, 3> s;
    cin >> s[0] >> s[1] >> s[2];
    sort(s.begin(), s.end());
    if (s[0] + s[1] <= s[2]) cout << "invalid\n";
    else if (s[0] == s[2]) cout << "equilateral\n";
    else if (s[0] == s[1] || s[1] == s[2]) cout << "isosceles\n";
    else cout << "scalene\n";
}
