#include <bits/stdc++.h>
using namespace std;

int main() {
    vector<string> words;
    string w;
    while (cin >> w) words.push_back(w);
    reverse(words.begin(), words.end());
    for (size_t i = 0; i < words.size(); i++) cout << words[i] << (i + 1 < words.size() ? " " : "\n");
}
