import sys

data = sys.stdin.read().split()
total, out = 0, []
for x in data[1 : int(data[0]) + 1]:
    out.append(total)
    total += int(x)
print(*out)
