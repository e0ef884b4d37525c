package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var n, count int
	fmt.Fscan(in, &n)
	for i := 0; i < n; i++ {
		var x int64
		fmt.Fscan(in, &x)
		if x%2 == 0 {
			count++
		}
	}
	fmt.Println(count)
}
