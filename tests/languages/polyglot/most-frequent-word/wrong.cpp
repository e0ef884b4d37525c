#include <bits/stdc++.h>
using namespace std;

int main() {
    unordered_map<string, int> counts;
    vector<string> order;
    string w;
    while (cin >> w)
        if (counts[w]++ == 0) order.push_back(w);
    string best = order[0];
    for (auto &word : order)
        if (counts[word] > counts[best]) best = word;
    cout << best << "\n";
}
