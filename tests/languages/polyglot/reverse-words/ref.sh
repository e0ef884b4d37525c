read -r -a words
out=()
for (( i = ${#words[@]} - 1; i >= 0; i-- )); do
  out+=("${words[i]}")
done
echo "${out[*]}"
