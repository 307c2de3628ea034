//go:build !linux

package service

// awaitExit cannot wait for pid's exit without reaping it here: a
// kqueue cannot watch a child that exited already, and procexit reaps it
// then. It returns false: the caller reaps first.
func awaitExit(pid int) bool { return false }
