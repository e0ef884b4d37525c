package main

import "fmt"

func main() {
	var h, m int
	fmt.Scanf("%d:%d", &h, &m)
	shown := h
	if h > 12 {
		shown = h - 12
	}
	half := "PM"
	if h < 12 {
		half = "AM"
	}
	fmt.Printf("%d:%02d %s\n", shown, m, half)
}
