from collections import Counter

counts = Counter(input().split())
print(counts.most_common(1)[0][0])
