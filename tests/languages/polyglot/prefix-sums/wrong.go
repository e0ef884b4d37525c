package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var n int
	fmt.Fscan(in, &n)
	var total int64
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var x int64
		fmt.Fscan(in, &x)
		out = append(out, strconv.FormatInt(total, 10))
		total = total + x
	}
	fmt.Println(strings.Join(out, " "))
}
