package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var n int
	var target int64
	fmt.Fscan(in, &n, &target)
	a := make([]int64, n)
	for i := range a {
		fmt.Fscan(in, &a[i])
	}
	count := 0
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if a[i]+a[j] == target {
				count++
			}
		}
	}
	fmt.Println(count)
}
