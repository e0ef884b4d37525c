from collections import Counter

counts = Counter(input().split())
best = max(counts.values())
print(min(w for w, c in counts.items() if c == best))
