import sys

data = list(map(int, sys.stdin.read().split()))
n, amount = data[0], data[1]
coins = data[2 : 2 + n]
INF = float("inf")
best = [0] + [INF] * amount
for a in range(1, amount + 1):
    for c in coins:
        if c <= a and best[a - c] + 1 < best[a]:
            best[a] = best[a - c] + 1
print(best[amount] if best[amount] != INF else -1)
