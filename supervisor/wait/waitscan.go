package wait

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"shellagent/outputbuf"
)

// How a wait reads a terminal's output. The PTY's reader only writes the
// ring, as for any terminal; the wait's goroutine reads what is new every
// scanEvery, so that a terminal that prints in many small writes costs
// one read of the ring per scanEvery, not one per write. A scan reads at
// most scanBudget bytes (except the first, which reads all the ring held
// when the wait started): a terminal that prints more than that in
// scanEvery has the older part skipped, like output the ring overwrote
// before the wait read it. The lines are found by internal/linescan.
const (
	scanEvery    = 50 * time.Millisecond
	scanBudget   = 256 << 10
	partialQuiet = 250 * time.Millisecond // a partial last line counts once the terminal has printed nothing for this long
	sentEvery    = 2 * time.Millisecond   // how often sent looks again
)

// sent waits until every client that holds ring (see outputbuf.Ring's
// Taken) has been sent its output up to offset off, or ctx ends: the
// wait's end quotes a line it read in the ring, and a client must not
// read the quote before the line. The writer sends control messages
// before output, so without this wait, a writer kept off the CPU sent
// the end first. No client holds a ring while none is attached or while
// the attached one is stalled: the wait then returns at once.
func sent(ctx context.Context, ring *outputbuf.Ring, off int64) {
	tick := time.NewTicker(sentEvery)
	defer tick.Stop()
	for {
		if taken, held := ring.Taken(); !held || taken >= off {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probePort reports whether port accepts a TCP connection on 127.0.0.1
// or ::1, naming the address that did.
func (w *Wait) probePort(ctx context.Context) (string, error) {
	var last error
	for _, host := range []string{"127.0.0.1", "::1"} {
		d := net.Dialer{Timeout: probeTimeout}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(w.spec.Port)))
		if err == nil {
			c.Close() // Best effort: it was only a probe.
			return fmt.Sprintf("Port %d accepts connections (on %s)", w.spec.Port, host), nil
		}
		last = err
	}
	return "", last
}
