hh, mm = input().strip().split(":")
h = int(hh)
print(f"{h if h <= 12 else h - 12}:{mm} {'AM' if h < 12 else 'PM'}")
