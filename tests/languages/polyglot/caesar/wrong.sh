read -r k
IFS= read -r line
out=""
for (( i = 0; i < ${#line}; i++ )); do
  c=${line:i:1}
  if [[ "$c" == " " ]]; then out+=" "; continue; fi
  code=$(printf '%d' "'$c")
  out+=$(printf "\\$(printf '%03o' $(( code + k )))")
done
echo "$out"
