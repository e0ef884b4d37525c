import sys

data = sys.stdin.read().split()
n = int(data[0])
best = 0
for x in data[1 : n + 1]:
    best = max(best, int(x))
print(best)
