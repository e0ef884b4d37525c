read -r n
steps=1
while (( n != 1 )); do
  if (( n % 2 == 0 )); then n=$(( n / 2 )); else n=$(( 3 * n + 1 )); fi
  steps=$(( steps + 1 ))
done
echo "$steps"
