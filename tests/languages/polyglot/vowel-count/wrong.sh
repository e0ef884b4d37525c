IFS= read -r line
vowels=${line//[^aeiou]/}
echo "${#vowels}"
