is_prime() {
  local n=$1 d=2
  (( n < 1 )) && return 1
  while (( d * d <= n )); do
    (( n % d == 0 )) && return 1
    d=$(( d + 1 ))
  done
  return 0
}
read -r t
for (( k = 0; k < t; k++ )); do
  read -r n
  if is_prime "$n"; then echo YES; else echo NO; fi
done
