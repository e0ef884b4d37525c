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
	values := make([]int64, n)
	for i := range values {
		fmt.Fscan(in, &values[i])
	}
	sort.Slice(values, func(i, j int) bool { return values[i] > values[j] })
	if len(values) < 2 {
		fmt.Println("NONE")
	} else {
		fmt.Println(values[1])
	}
}
