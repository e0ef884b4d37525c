read -r n
digits=""
while (( n > 0 )); do
  digits="$(( n % 2 ))$digits"
  n=$(( n / 2 ))
done
echo "${digits}"
