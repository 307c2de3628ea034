package main

import (
	"fmt"
	"os"
)

// runClient runs "shellagent client".
func runClient(args []string) int {
	fmt.Fprintln(os.Stderr, "shellagent: client: not implemented yet")
	return 2
}
