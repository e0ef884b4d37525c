read -r n target
read -r -a a
count=0
for (( i = 0; i < n; i++ )); do
  for (( j = i; j < n; j++ )); do
    if (( a[i] + a[j] == target )); then count=$(( count + 1 )); fi
  done
done
echo "$count"
