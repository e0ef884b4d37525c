k = int(input())
line = input()
print("".join(c if c == " " else chr((ord(c) - 97 + k) % 26 + 97) for c in line))
