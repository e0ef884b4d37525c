read -r n
read -r -a xs
best=${xs[0]}
for x in "${xs[@]}"; do
  if (( x > best )); then best=$x; fi
done
echo "$best"
