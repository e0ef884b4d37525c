a, b, m = map(int, input().split())
result, base = 1, a % m
while b > 0:
    if b & 1:
        result = result * base % m
    base = base * base % m
    b >>= 1
print(result)
