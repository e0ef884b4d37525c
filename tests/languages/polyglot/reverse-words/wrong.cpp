#include <bits/stdc++.h>
using namespace std;

int main() {
    string line;
    getline(cin, line);
    reverse(line.begin(), line.end());
    cout << line << "\n";
}
