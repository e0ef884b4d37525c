s = input().strip()
print(sum(int(c) for c in s[:-1]))
