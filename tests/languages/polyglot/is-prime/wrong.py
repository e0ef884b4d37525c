import sys


def is_prime(n):
    if n < 1:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


data = sys.stdin.read().split()
for x in data[1 : int(data[0]) + 1]:
    print("YES" if is_prime(int(x)) else "NO")
