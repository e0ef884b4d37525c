n = int(input())
digits = ""
while n > 0:
    digits = str(n % 2) + digits
    n //= 2
print(digits)
