package main

import "fmt"

func main() {
	var a, b, m uint64
	fmt.Scan(&a, &b, &m)
	result, base := 1%m, a%m
	for ; b > 0; b >>= 1 {
		if b&1 == 1 {
			result = result * base % m
		}
		base = base * base % m
	}
	fmt.Println(result)
}
