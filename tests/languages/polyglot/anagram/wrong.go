package main

import "fmt"

func main() {
	var a, b string
	fmt.Scan(&a, &b)
	var inA, inB [26]bool
	for _, c := range a {
		inA[c-'a'] = true
	}
	for _, c := range b {
		inB[c-'a'] = true
	}
	if len(a) == len(b) && inA == inB {
		fmt.Println("YES")
	} else {
		fmt.Println("NO")
	}
}
