read -r n
read -r -a xs
second=$(printf '%s\n' "${xs[@]}" | sort -n -u -r | sed -n 2p)
echo "${second:-NONE}"
