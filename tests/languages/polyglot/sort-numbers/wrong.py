import sys

data = sys.stdin.read().split()
n = int(data[0])
print(" ".join(sorted(data[1 : n + 1])))
