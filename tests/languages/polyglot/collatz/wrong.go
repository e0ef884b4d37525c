package main

import "fmt"

func main() {
	var n int64
	fmt.Scan(&n)
	steps := 1
	for n != 1 {
		if n%2 == 0 {
			n /= 2
		} else {
			n = 3*n + 1
		}
		steps++
	}
	fmt.Println(steps)
}
