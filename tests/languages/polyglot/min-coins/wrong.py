import sys

data = list(map(int, sys.stdin.read().split()))
n, amount = data[0], data[1]
coins = sorted(data[2 : 2 + n], reverse=True)
count = 0
for c in coins:
    count += amount // c
    amount %= c
print(count if amount == 0 else -1)
