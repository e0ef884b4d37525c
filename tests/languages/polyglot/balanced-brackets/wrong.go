package main

import (
	"fmt"
	"strings"
)

func main() {
	var s string
	fmt.Scan(&s)
	depth := [3]int{}
	ok := true
	for _, c := range s {
		if i := strings.IndexRune("([{", c); i >= 0 {
			depth[i]++
		} else if i := strings.IndexRune(")]}", c); i >= 0 {
			depth[i]--
			if depth[i] < 0 {
				ok = false
			}
		}
	}
	if ok && depth == [3]int{} {
		fmt.Println("YES")
	} else {
		fmt.Println("NO")
	}
}
