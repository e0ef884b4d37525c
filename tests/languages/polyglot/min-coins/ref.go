package main

import "fmt"

func main() {
	var n, amount int
	fmt.Scan(&n, &amount)
	coins := make([]int, n)
	for i := range coins {
		fmt.Scan(&coins[i])
	}
	best := make([]int, amount+1)
	for a := 1; a <= amount; a++ {
		best[a] = -1
		for _, c := range coins {
			if c <= a && best[a-c] >= 0 && (best[a] < 0 || best[a-c]+1 < best[a]) {
				best[a] = best[a-c] + 1
			}
		}
	}
	fmt.Println(best[amount])
}
