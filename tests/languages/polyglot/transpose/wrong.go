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
	var r, c int
	fmt.Fscan(in, &r, &c)
	a := make([][]int, r)
	for i := range a {
		a[i] = make([]int, c)
		for j := range a[i] {
			fmt.Fscan(in, &a[i][j])
		}
	}
	for j := 0; j < r; j++ {
		line := make([]string, c)
		for i := 0; i < c; i++ {
			line[i] = strconv.Itoa(a[j][i])
		}
		fmt.Println(strings.Join(line, " "))
	}
}
