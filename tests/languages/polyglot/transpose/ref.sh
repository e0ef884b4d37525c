read -r r c
a=()
for (( i = 0; i < r; i++ )); do
  read -r -a row
  a+=("${row[@]}")
done
for (( j = 0; j < c; j++ )); do
  line=()
  for (( i = 0; i < r; i++ )); do
    line+=("${a[i * c + j]}")
  done
  echo "${line[*]}"
done
