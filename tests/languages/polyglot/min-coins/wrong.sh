read -r n amount
read -r -a coins
count=0
for c in $(printf '%s\n' "${coins[@]}" | sort -n -r); do
  count=$(( count + amount / c ))
  amount=$(( amount % c ))
done
if (( amount == 0 )); then echo "$count"; else echo -1; fi
