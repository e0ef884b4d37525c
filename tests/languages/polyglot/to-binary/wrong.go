package main

import (
	"fmt"
)

func main() {
	var n int64
	fmt.Scan(&n)
	d := ""
	for ; n > 0; n /= 2 {
		d = fmt.Sprint(n%2) + d
	}
	fmt.Println(d)
}
