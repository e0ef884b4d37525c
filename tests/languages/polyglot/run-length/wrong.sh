read -r s
out=""
run=1
for (( i = 1; i < ${#s}; i++ )); do
  if [[ "${s:i:1}" == "${s:i-1:1}" ]]; then run=$(( run + 1 ))
  else out+="${s:i-1:1}$run"; run=1
  fi
done
echo "$out"
