import sys

data = list(map(int, sys.stdin.read().split()))
xs = data[1 : data[0] + 1]
best = run = 1
for i in range(1, len(xs)):
    run = run + 1 if xs[i] > xs[i - 1] else 1
    best = max(best, run)
print(best)
