read -r n
read -r -a xs
second=$(printf '%s\n' "${xs[@]}" | sort -n -r | sed -n 2p)
echo "${second:-NONE}"
