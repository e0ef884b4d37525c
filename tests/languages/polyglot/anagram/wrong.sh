read -r a b
key() { printf '%s' "$1" | fold -w1 | sort -u | tr -d '\n'; }
if (( ${#a} == ${#b} )) && [[ "$(key "$a")" == "$(key "$b")" ]]; then echo YES; else echo NO; fi
