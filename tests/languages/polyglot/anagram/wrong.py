a, b = input().split()
print("YES" if len(a) == len(b) and set(a) == set(b) else "NO")
