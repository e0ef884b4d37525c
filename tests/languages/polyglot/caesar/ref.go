package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	var k byte
	fmt.Fscanln(in, &k)
	line, _ := in.ReadString('\n')
	b := []byte(strings.TrimRight(line, "\r\n"))
	for i, c := range b {
		if c != ' ' {
			b[i] = (c-'a'+k)%26 + 'a'
		}
	}
	fmt.Println(string(b))
}
