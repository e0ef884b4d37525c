read -r line
r=""
for (( i = ${#line} - 1; i >= 0; i-- )); do r+="${line:i:1}"; done
echo "$r"
