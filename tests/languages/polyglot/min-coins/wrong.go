package main

import (
	"fmt"
	"sort"
)

func main() {
	var n, amount int
	fmt.Scan(&n, &amount)
	coins := make([]int, n)
	for i := range coins {
		fmt.Scan(&coins[i])
	}
	sort.Sort(sort.Reverse(sort.IntSlice(coins)))
	count := 0
	for _, c := range coins {
		count += amount / c
		amount %= c
	}
	if amount == 0 {
		fmt.Println(count)
	} else {
		fmt.Println(-1)
	}
}
