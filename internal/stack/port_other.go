//go:build !linux

package stack

// listeners is nothing where /proc/net/tcp is not: PortHolder then knows
// a port is taken by its failed listens alone.
func listeners(port int) []uint64 { return nil }

// holder knows no holder where /proc is not.
func holder(inodes []uint64) (int, string) { return 0, "" }

// ListenPorts does not know where /proc is not.
func ListenPorts(pids []int) ([]int, bool) { return nil, false }

// holdForks holds nothing where the net package may take syscall.ForkLock
// itself to open a socket (darwin): a read lock taken twice can deadlock
// with a fork waiting between.
func holdForks() (release func()) { return func() {} }
