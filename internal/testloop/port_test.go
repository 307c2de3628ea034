package testloop

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePort: the port is outside the ephemeral range, a server can
// listen on it, and a second call gives another.
func TestFreePort(t *testing.T) {
	lo, hi := ephemeralRange()
	seen := make(map[int]bool)
	for range 3 {
		p := FreePort(t)
		if lo <= p && p <= hi {
			t.Errorf("port %d is in the ephemeral range %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Errorf("port %d returned twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("listen on the free port: %v", err)
		}
		l.Close()
	}
}
