#include <bits/stdc++.h>
using namespace std;

int main() {
    map<string, int> counts;
    string w;
    while (cin >> w) counts[w]++;
    string best;
    int top = 0;
    for (auto &[word, c] : counts)
        if (c > top) top = c, best = word;
    cout << best << "\n";
}
