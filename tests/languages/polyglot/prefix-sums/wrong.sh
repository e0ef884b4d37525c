read -r n
read -r -a xs
total=0
out=()
for x in "${xs[@]}"; do
  out+=("$total")
  total=$(( total + x ))
done
echo "${out[*]}"
