package main

import "fmt"

func main() {
	var a, b string
	fmt.Scan(&a, &b)
	var count [26]int
	for _, c := range a {
		count[c-'a']++
	}
	for _, c := range b {
		count[c-'a']--
	}
	if count == [26]int{} {
		fmt.Println("YES")
	} else {
		fmt.Println("NO")
	}
}
