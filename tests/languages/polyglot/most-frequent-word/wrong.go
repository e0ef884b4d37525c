package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	counts := map[string]int{}
	var order []string
	for _, w := range strings.Fields(line) {
		if counts[w] == 0 {
			order = append(order, w)
		}
		counts[w]++
	}
	best := order[0]
	for _, w := range order {
		if counts[w] > counts[best] {
			best = w
		}
	}
	fmt.Println(best)
}
