n = int(input())
result = 1
for i in range(1, n + 1):
    result = result * i % 1_000_000_007
print(result)
