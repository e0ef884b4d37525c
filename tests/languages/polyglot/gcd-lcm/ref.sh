read -r a b
x=$a; y=$b
while (( y != 0 )); do t=$(( x % y )); x=$y; y=$t; done
g=$x
echo "$g $(( a / g * b ))"
