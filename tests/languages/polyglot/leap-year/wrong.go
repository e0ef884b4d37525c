package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var t int
	fmt.Fscan(in, &t)
	for ; t > 0; t-- {
		var y int
		fmt.Fscan(in, &y)
		if y%4 == 0 && y%100 != 0 {
			fmt.Println("YES")
		} else {
			fmt.Println("NO")
		}
	}
}
