read -r n
result=1
for (( i = 1; i <= n; i++ )); do
  result=$(( result * i % 1000000007 ))
done
echo "$result"
