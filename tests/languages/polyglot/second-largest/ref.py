import sys

data = sys.stdin.read().split()
values = sorted({int(x) for x in data[1 : int(data[0]) + 1]}, reverse=True)
print(values[1] if len(values) > 1 else "NONE")
