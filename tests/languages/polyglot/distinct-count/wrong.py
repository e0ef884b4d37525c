import sys

data = sys.stdin.read().split()
xs = data[1 : int(data[0]) + 1]
print(1 + sum(1 for i in range(1, len(xs)) if xs[i] != xs[i - 1]))
