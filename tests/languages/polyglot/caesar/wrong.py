k = int(input())
line = input()
print("".join(c if c == " " else chr(ord(c) + k) for c in line))
