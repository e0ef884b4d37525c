package main

import (
	"fmt"
)

func main() {
	var s string
	fmt.Scan(&s)
	want := map[byte]byte{')': '(', ']': '[', '}': '{'}
	var stack []byte
	ok := true
	for i := 0; i < len(s) && ok; i++ {
		c := s[i]
		if c == '(' || c == '[' || c == '{' {
			stack = append(stack, c)
		} else if len(stack) == 0 || stack[len(stack)-1] != want[c] {
			ok = false
		} else {
			stack = stack[:len(stack)-1]
		}
	}
	if ok && len(stack) == 0 {
		fmt.Println("YES")
	} else {
		fmt.Println("NO")
	}
}
