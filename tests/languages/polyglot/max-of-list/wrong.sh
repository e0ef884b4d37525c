read -r n
read -r -a xs
best=0
for x in "${xs[@]}"; do
  if (( x > best )); then best=$x; fi
done
echo "$best"
