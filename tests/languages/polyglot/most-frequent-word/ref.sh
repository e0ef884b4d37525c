read -r -a words
printf '%s\n' "${words[@]}" | sort | uniq -c | sort -k1,1nr -k2,2 | head -n 1 | awk '{print $2}'
