package testloop

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// FreePort returns a TCP port that nothing listens on or holds now, for a
// test that has a server listen on it later (or checks that nothing
// does). It is chosen outside the system's ephemeral range, where a port
// the system picks (":0") comes from: any parallel test's outgoing
// connection may take such a port as its own end at any moment, and a
// listen on it then fails with EADDRINUSE. No port is returned twice in
// one test binary.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := ephemeralRange()
	first, last := 1024, lo-1 // below the range, where it leaves room
	if lo-1024 < 4096 {
		first, last = hi+1, 65535
	}
	if last-first < 1024 {
		t.Fatalf("testloop.FreePort: no room outside the ephemeral range %d-%d", lo, hi)
	}
	given.Lock()
	defer given.Unlock()
	for range 1000 {
		p := first + rand.IntN(last-first+1)
		if !given.ports[p] && free(p) {
			given.ports[p] = true
			return p
		}
	}
	t.Fatalf("testloop.FreePort: no free port from %d to %d", first, last)
	return 0
}

// given is every port FreePort returned.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// free reports whether a listen on port succeeds on every IPv4 address
// (which a listen on 127.0.0.1 conflicts with) and, where there is IPv6,
// on every IPv6 address.
func free(port int) bool {
	for _, network := range []string{"tcp4", "tcp6"} {
		l, err := net.Listen(network, ":"+strconv.Itoa(port))
		switch {
		case err == nil:
			l.Close() // Best effort: it never accepted.
		case network == "tcp6" && !errors.Is(err, syscall.EADDRINUSE):
			// No IPv6 here.
		default:
			return false
		}
	}
	return true
}

// ephemeralRange is the range from which the system picks a port for a
// connection's end or a listen on port 0 (Linux's default where /proc
// does not tell).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		l, err1 := strconv.Atoi(f[0])
		h, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil && 1024 <= l && l <= h && h <= 65535 {
			return l, h
		}
	}
	return lo, hi
}
