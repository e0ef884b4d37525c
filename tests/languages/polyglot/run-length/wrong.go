package main

import (
	"fmt"
	"strings"
)

func main() {
	var s string
	fmt.Scan(&s)
	var out strings.Builder
	run := 1
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			run++
		} else {
			fmt.Fprintf(&out, "%c%d", s[i-1], run)
			run = 1
		}
	}
	fmt.Println(out.String())
}
