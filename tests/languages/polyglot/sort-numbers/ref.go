package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var n int
	fmt.Fscan(in, &n)
	v := make([]int64, n)
	for i := range v {
		fmt.Fscan(in, &v[i])
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	out := make([]string, n)
	for i, x := range v {
		out[i] = strconv.FormatInt(x, 10)
	}
	fmt.Println(strings.Join(out, " "))
}
