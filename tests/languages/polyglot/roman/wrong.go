package main

import (
	"fmt"
	"strings"
)

func main() {
	var n int
	fmt.Scan(&n)
	values := []int{1000, 500, 100, 50, 10, 5, 1}
	symbols := []string{"M", "D", "C", "L", "X", "V", "I"}
	var out strings.Builder
	for i, v := range values {
		for n >= v {
			out.WriteString(symbols[i])
			n -= v
		}
	}
	fmt.Println(out.String())
}
