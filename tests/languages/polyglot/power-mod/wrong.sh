read -r a b m
result=$(( 1 ))
base=$(( a % m ))
while (( b > 0 )); do
  if (( b & 1 )); then result=$(( result * base % m )); fi
  base=$(( base * base % m ))
  b=$(( b >> 1 ))
done
echo "$result"
