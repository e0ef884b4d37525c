read -r s
round=0; square=0; curly=0; ok=1
for (( i = 0; i < ${#s}; i++ )); do
  case "${s:i:1}" in
    "(") round=$((round + 1)) ;;
    ")") round=$((round - 1)); (( round < 0 )) && ok=0 ;;
    "[") square=$((square + 1)) ;;
    "]") square=$((square - 1)); (( square < 0 )) && ok=0 ;;
    "{") curly=$((curly + 1)) ;;
    "}") curly=$((curly - 1)); (( curly < 0 )) && ok=0 ;;
  esac
done
if (( ok && round == 0 && square == 0 && curly == 0 )); then echo YES; else echo NO; fi
