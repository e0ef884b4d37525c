depth = {"(": 0, "[": 0, "{": 0}
opening = {")": "(", "]": "[", "}": "{"}
ok = True
for c in input().strip():
    if c in depth:
        depth[c] += 1
    else:
        depth[opening[c]] -= 1
        if depth[opening[c]] < 0:
            ok = False
print("YES" if ok and all(v == 0 for v in depth.values()) else "NO")
