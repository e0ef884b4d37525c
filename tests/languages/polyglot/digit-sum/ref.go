package main

import "fmt"

func main() {
	var s string
	fmt.Scan(&s)
	sum := 0
	for i := 0; i < len(s); i++ {
		sum += int(s[i] - '0')
	}
	fmt.Println(sum)
}
