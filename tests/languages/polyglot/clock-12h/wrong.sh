IFS=: read -r hh mm
h=$(( 10#$hh ))
if (( h < 12 )); then half=AM; else half=PM; fi
echo "$(( h <= 12 ? h : h - 12 )):$mm $half"
