#include <bits/stdc++.h>
using namespace std;

int main() {
    int r, c;
    cin >> r >> c;
    vector<vector<int>> a(r, vector<int>(c));
    for (auto &row : a)
        for (auto &x : row) cin >> x;
    for (int j = 0; j < r; j++)
        for (int i = 0; i < c; i++) cout << a[j][i] << (i + 1 < c ? ' ' : '\n');
}
