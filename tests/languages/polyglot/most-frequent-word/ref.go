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
	for _, w := range strings.Fields(line) {
		counts[w]++
	}
	best := ""
	for w, c := range counts {
		if best == "" || c > counts[best] || (c == counts[best] && w < best) {
			best = w
		}
	}
	fmt.Println(best)
}
