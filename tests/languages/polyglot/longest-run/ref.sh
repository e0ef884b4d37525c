read -r n
read -r -a xs
best=1; run=1
for (( i = 1; i < n; i++ )); do
  if (( xs[i] > xs[i - 1] )); then run=$(( run + 1 )); else run=1; fi
  if (( run > best )); then best=$run; fi
done
echo "$best"
