read -r k
IFS= read -r line
alphabet=abcdefghijklmnopqrstuvwxyz
shifted=${alphabet:k}${alphabet:0:k}
echo "$line" | tr "$alphabet" "$shifted"
