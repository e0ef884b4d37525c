IFS= read -r line
vowels=${line//[^aeiouAEIOU]/}
echo "${#vowels}"
