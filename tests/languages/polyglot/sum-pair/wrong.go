package main

import "fmt"

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func main() {
	var a, b int64
	fmt.Scan(&a, &b)
	fmt.Println(abs(a) + abs(b))
}
