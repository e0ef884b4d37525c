package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	count := 0
	for _, c := range line {
		if strings.ContainsRune("aeiouAEIOU", c) {
			count++
		}
	}
	fmt.Println(count)
}
