#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    cin >> n;
    vector<int> values = {1000, 500, 100, 50, 10, 5, 1};
    vector<string> symbols = {"M", "D", "C", "L", "X", "V", "I"};
    string out;
    for (size_t i = 0; i < values.size(); i++)
        while (n >= values[i]) out += symbols[i], n -= values[i];
    cout << out << "\n";
}
