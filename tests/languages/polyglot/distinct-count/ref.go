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
	seen := map[int64]bool{}
	for i := 0; i < n; i++ {
		var x int64
		fmt.Fscan(in, &x)
		seen[x] = true
	}
	fmt.Println(len(seen))
}
