read -r n amount
read -r -a coins
best=(0)
for (( a = 1; a <= amount; a++ )); do
  b=-1
  for c in "${coins[@]}"; do
    if (( c <= a && best[a - c] >= 0 )); then
      cand=$(( best[a - c] + 1 ))
      if (( b < 0 || cand < b )); then b=$cand; fi
    fi
  done
  best[a]=$b
done
echo "${best[amount]}"
