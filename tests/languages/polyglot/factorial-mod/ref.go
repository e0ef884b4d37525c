package main

import "fmt"

func main() {
	var n int64
	fmt.Scan(&n)
	result := int64(1)
	for i := int64(1); i <= n; i++ {
		result = result * i % 1000000007
	}
	fmt.Println(result)
}
