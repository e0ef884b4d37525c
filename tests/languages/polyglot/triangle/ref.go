package main

import (
	"fmt"
	"sort"
)

func main() {
	s := make([]int64, 3)
	fmt.Scan(&s[0], &s[1], &s[2])
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	switch {
	case s[0] + s[1] <= s[2]:
		fmt.Println("invalid")
	case s[0] == s[2]:
		fmt.Println("equilateral")
	case s[0] == s[1] || s[1] == s[2]:
		fmt.Println("isosceles")
	default:
		fmt.Println("scalene")
	}
}
