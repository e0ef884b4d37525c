#include <bits/stdc++.h>
using namespace std;

int main() {
    int k;
    string line;
    cin >> k;
    cin.ignore(numeric_limits<streamsize>::max(), '\n');
    getline(cin, line);
    for (auto &ch : line) {
        int c = ch;
        if (c != ' ') ch = char((c - 'a' + k) % 26 + 'a');
    }
    cout << line << "\n";
}
