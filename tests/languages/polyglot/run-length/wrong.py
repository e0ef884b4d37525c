s = input().strip()
out, run = [], 1
for i in range(1, len(s)):
    if s[i] == s[i - 1]:
        run += 1
    else:
        out.append(f"{s[i - 1]}{run}")
        run = 1
print("".join(out))
