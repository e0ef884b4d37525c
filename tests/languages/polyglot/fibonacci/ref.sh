read -r n
a=0; b=1
for (( i = 0; i < n; i++ )); do
  t=$(( a + b )); a=$b; b=$t
done
echo "$a"
