package main

import (
	"bufio"
	"fmt"
	"os"
)

func isPrime(n int64) bool {
	if n < 1 {
		return false
	}
	for d := int64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

func main() {
	in := bufio.NewReader(os.Stdin)
	var t int
	fmt.Fscan(in, &t)
	for ; t > 0; t-- {
		var n int64
		fmt.Fscan(in, &n)
		if isPrime(n) {
			fmt.Println("YES")
		} else {
			fmt.Println("NO")
		}
	}
}
