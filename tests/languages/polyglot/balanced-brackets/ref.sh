read -r s
stack=""
ok=1
for (( i = 0; i < ${#s}; i++ )); do
  c=${s:i:1}
  case "$c" in
    "(" | "[" | "{") stack+="$c" ;;
    *)
      case "$c" in ")") want="(" ;; "]") want="[" ;; *) want="{" ;; esac
      if [[ -z "$stack" || "${stack: -1}" != "$want" ]]; then ok=0; break; fi
      stack=${stack:0:${#stack}-1}
      ;;
  esac
done
if (( ok )) && [[ -z "$stack" ]]; then echo YES; else echo NO; fi
