a, b = input().split()
print("YES" if sorted(a) == sorted(b) else "NO")
