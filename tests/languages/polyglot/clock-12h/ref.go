package main

import "fmt"

func main() {
	var h, m int
	fmt.Scanf("%d:%d", &h, &m)
	shown := (h+11)%12 + 1
	half := "PM"
	if h < 12 {
		half = "AM"
	}
	fmt.Printf("%d:%02d %s\n", shown, m, half)
}
