read -r s
out=""
i=0
while (( i < ${#s} )); do
  c=${s:i:1}
  j=$i
  while (( j < ${#s} )) && [[ "${s:j:1}" == "$c" ]]; do j=$(( j + 1 )); done
  out+="$c$(( j - i ))"
  i=$j
done
echo "$out"
