read -r t
for (( k = 0; k < t; k++ )); do
  read -r y
  if (( y % 4 == 0 && y % 100 != 0 )); then echo YES; else echo NO; fi
done
