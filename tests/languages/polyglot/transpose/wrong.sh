read -r r c
a=()
for (( i = 0; i < r; i++ )); do
  read -r -a row
  a+=("${row[@]}")
done
for (( j = 0; j < r; j++ )); do
  line=()
  for (( i = 0; i < c; i++ )); do
    line+=("${a[j * c + i]}")
  done
  echo "${line[*]}"
done
