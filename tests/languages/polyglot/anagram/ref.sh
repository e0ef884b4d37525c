read -r a b
key() { printf '%s' "$1" | fold -w1 | sort | tr -d '\n'; }
if [[ "$(key "$a")" == "$(key "$b")" ]]; then echo YES; else echo NO; fi
