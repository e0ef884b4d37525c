import sys

data = list(map(int, sys.stdin.read().split()))
n, target = data[0], data[1]
a = data[2 : 2 + n]
print(sum(1 for i in range(n) for j in range(i, n) if a[i] + a[j] == target))
