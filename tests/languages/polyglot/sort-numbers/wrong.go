package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var n int
	fmt.Fscan(in, &n)
	v := make([]string, n)
	for i := range v {
		fmt.Fscan(in, &v[i])
	}
	sort.Strings(v)
	fmt.Println(strings.Join(v, " "))
}
