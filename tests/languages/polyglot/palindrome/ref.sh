read -r s
r=""
for (( i = ${#s} - 1; i >= 0; i-- )); do r+="${s:i:1}"; done
if [[ "$s" == "$r" ]]; then echo YES; else echo NO; fi
