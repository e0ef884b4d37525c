read -r s
sum=0
for (( i = 0; i < ${#s} - 1; i++ )); do
  sum=$(( sum + ${s:i:1} ))
done
echo "$sum"
