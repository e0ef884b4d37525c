hh, mm = input().strip().split(":")
h = int(hh)
print(f"{(h + 11) % 12 + 1}:{mm} {'AM' if h < 12 else 'PM'}")
