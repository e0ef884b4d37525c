package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var n int
	fmt.Fscan(in, &n)
	var best, x int64
	fmt.Fscan(in, &best)
	for i := 1; i < n; i++ {
		fmt.Fscan(in, &x)
		if x > best {
			best = x
		}
	}
	fmt.Println(best)
}
