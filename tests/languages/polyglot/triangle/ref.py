a, b, c = sorted(map(int, input().split()))
if a + b <= c:
    print("invalid")
elif a == c:
    print("equilateral")
elif a == b or b == c:
    print("isosceles")
else:
    print("scalene")
