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
	v := make([]int64, n)
	for i := range v {
		fmt.Fscan(in, &v[i])
	}
	best, run := 1, 1
	for i := 1; i < n; i++ {
		if v[i] >= v[i-1] {
			run++
		} else {
			run = 1
		}
		if run > best {
			best = run
		}
	}
	fmt.Println(best)
}
