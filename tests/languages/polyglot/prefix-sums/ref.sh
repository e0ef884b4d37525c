read -r n
read -r -a xs
total=0
out=()
for x in "${xs[@]}"; do
  total=$(( total + x ))
  out+=("$total")
done
echo "${out[*]}"
