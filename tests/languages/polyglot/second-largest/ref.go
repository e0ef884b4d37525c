package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var n int
	fmt.Fscan(in, &n)
	seen := map[int64]bool{}
	var values []int64
	for i := 0; i < n; i++ {
		var x int64
		fmt.Fscan(in, &x)
		if !seen[x] {
			seen[x] = true
			values = append(values, x)
		}
	}
	sort.Slice(values, func(i, j int) bool { return values[i] > values[j] })
	if len(values) < 2 {
		fmt.Println("NONE")
	} else {
		fmt.Println(values[1])
	}
}
