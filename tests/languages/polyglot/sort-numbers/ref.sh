read -r n
read -r -a xs
printf '%s\n' "${xs[@]}" | sort -n | paste -sd ' '
