read -r -a words
declare -A counts
order=()
for w in "${words[@]}"; do
  if [[ -z "${counts[$w]}" ]]; then order+=("$w"); counts[$w]=0; fi
  counts[$w]=$(( counts[$w] + 1 ))
done
best=${order[0]}
for w in "${order[@]}"; do
  if (( counts[$w] > counts[$best] )); then best=$w; fi
done
echo "$best"
