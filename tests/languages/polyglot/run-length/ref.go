package main

import (
	"fmt"
	"strings"
)

func main() {
	var s string
	fmt.Scan(&s)
	var out strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		fmt.Fprintf(&out, "%c%d", s[i], j-i)
		i = j
	}
	fmt.Println(out.String())
}
