#include <bits/stdc++.h>
using namespace std;

int main() {
    string line, vowels = "aeiouAEIOU";
    getline(cin, line);
    int count = 0;
    for (char c : line)
        if (vowels.find(c) != string::npos) count++;
    cout << count << "\n";
}
