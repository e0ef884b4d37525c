read -r n
values=(1000 500 100 50 10 5 1)
symbols=(M D C L X V I)
out=""
for (( i = 0; i < ${#values[@]}; i++ )); do
  while (( n >= values[i] )); do
    out+=${symbols[i]}
    n=$(( n - values[i] ))
  done
done
echo "$out"
