import sys

data = sys.stdin.read().split()
for y in map(int, data[1 : int(data[0]) + 1]):
    print("YES" if y % 4 == 0 and y % 100 != 0 else "NO")
