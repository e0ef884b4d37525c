package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var n, count int
	var prev int64
	fmt.Fscan(in, &n)
	for i := 0; i < n; i++ {
		var x int64
		fmt.Fscan(in, &x)
		if i == 0 || x != prev {
			count++
		}
		prev = x
	}
	fmt.Println(count)
}
