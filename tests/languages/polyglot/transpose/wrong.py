import sys

data = list(map(int, sys.stdin.read().split()))
r, c = data[0], data[1]
a = [data[2 + i * c : 2 + (i + 1) * c] for i in range(r)]
for row in a:
    print(" ".join(map(str, row)))
