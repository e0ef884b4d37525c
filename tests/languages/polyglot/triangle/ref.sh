read -r -a s
mapfile -t s < <(printf '%s\n' "${s[@]}" | sort -n)
if (( s[0] + s[1] <= s[2] )); then echo invalid
elif (( s[0] == s[2] )); then echo equilateral
elif (( s[0] == s[1] || s[1] == s[2] )); then echo isosceles
else echo scalene
fi
