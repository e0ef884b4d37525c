read -r n
read -r -a xs
count=0
for x in "${xs[@]}"; do
  if (( x > 0 && x % 2 == 0 )); then count=$((count + 1)); fi
done
echo "$count"
