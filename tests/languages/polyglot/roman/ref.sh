read -r n
values=(1000 900 500 400 100 90 50 40 10 9 5 4 1)
symbols=(M CM D CD C XC L XL X IX V IV I)
out=""
for (( i = 0; i < ${#values[@]}; i++ )); do
  while (( n >= values[i] )); do
    out+=${symbols[i]}
    n=$(( n - values[i] ))
  done
done
echo "$out"
