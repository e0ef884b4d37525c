line = input()
print(sum(1 for c in line if c in "aeiouAEIOU"))
