package outputbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// step is one Next as the test expects it: the bytes read and how many
// were passed over before them.
type step struct {
	data string
	lost int64
}

func (s step) String() string { return fmt.Sprintf("{%q lost %d}", s.data, s.lost) }

func TestCursorReadsWhatTheRingHoldsAndCountsWhatItLost(t *testing.T) {
	tests := []struct {
		name    string
		cap     int
		written string // written in one Write each, split at '|'
		at      int64  // CursorAt
		skip    int64  // Skip before reading, 0 for none
		buf     int    // len(p) of each Next
		want    []step // until Next returns 0, 0
	}{
		{name: "empty ring", cap: 8, buf: 4},
		{name: "empty ring, offset past it", cap: 8, at: 5, buf: 4},
		{name: "all at once", cap: 16, written: "hello", buf: 16,
			want: []step{{"hello", 0}}},
		{name: "in pieces of the buffer", cap: 16, written: "hello|world", buf: 4,
			want: []step{{"hell", 0}, {"owor", 0}, {"ld", 0}}},
		{name: "from an offset", cap: 16, written: "hello|world", at: 5, buf: 16,
			want: []step{{"world", 0}}},
		{name: "at the end", cap: 16, written: "hello", at: 5, buf: 16},
		{name: "wrapped: lost what was overwritten", cap: 8, written: "abcdef|ghijkl", buf: 16,
			want: []step{{"efghijkl", 4}}},
		{name: "wrapped past the offset", cap: 8, written: "abcdef|ghijkl", at: 2, buf: 3,
			want: []step{{"efg", 2}, {"hij", 0}, {"kl", 0}}},
		{name: "wrapped before the offset: nothing lost", cap: 8, written: "abcdef|ghijkl", at: 6, buf: 16,
			want: []step{{"ghijkl", 0}}},
		{name: "skip counts as lost", cap: 16, written: "hello|world", skip: 7, buf: 16,
			want: []step{{"rld", 7}}},
		{name: "skip and wrap: one loss", cap: 8, written: "abcdef|ghijkl", at: 1, skip: 2, buf: 16,
			want: []step{{"efghijkl", 3}}},
		{name: "skip behind the offset changes nothing", cap: 16, written: "hello", at: 3, skip: 1, buf: 16,
			want: []step{{"lo", 0}}},
		{name: "skip to the end: lost, nothing read", cap: 16, written: "hello", skip: 5, buf: 16,
			want: []step{{"", 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.cap)
			if tt.written != "" {
				for w := range strings.SplitSeq(tt.written, "|") {
					r.Write([]byte(w))
				}
			}
			c := CursorAt(tt.at)
			c.Skip(tt.skip)
			p := make([]byte, tt.buf)
			var got []step
			for range 100 {
				n, lost := c.Next(r, p)
				if n == 0 && lost == 0 {
					break
				}
				got = append(got, step{string(p[:n]), lost})
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("Next gave %v, want %v", got, tt.want)
			}
			if want := max(r.Total(), tt.at, tt.skip); c.Offset() != want {
				t.Fatalf("Offset() = %d after reading all, want %d", c.Offset(), want)
			}
		})
	}
}

func TestCursorNextAllocatesNothing(t *testing.T) {
	r := New(64)
	p := make([]byte, 16)
	var c Cursor
	allocs := testing.AllocsPerRun(100, func() {
		r.Write([]byte("0123456789abcdefghij"))
		for {
			if n, lost := c.Next(r, p); n == 0 && lost == 0 {
				return
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("Next allocates %v times a run, want 0", allocs)
	}
}

func TestCursorWhileTheRingIsWritten(t *testing.T) {
	// A cursor read while the writer writes accounts for every byte
	// written, in order: each one read, with the value written, or lost.
	r := New(4096)
	const total = 1 << 20
	var wg sync.WaitGroup
	wg.Go(func() {
		p := make([]byte, 1000)
		for off := 0; off < total; off += len(p) {
			for i := range p {
				p[i] = byte((off + i) % 251)
			}
			r.Write(p[:min(len(p), total-off)])
		}
	})
	var c Cursor
	var read, lost int64
	buf := make([]byte, 1500)
	for read+lost < total {
		n, l := c.Next(r, buf)
		start := c.Offset() - int64(n)
		for i := range n {
			if want := byte((start + int64(i)) % 251); buf[i] != want {
				t.Fatalf("byte at %d = %d, want %d", start+int64(i), buf[i], want)
			}
		}
		read, lost = read+int64(n), lost+l
		if c.Offset() != read+lost {
			t.Fatalf("Offset() = %d, but %d read and %d lost", c.Offset(), read, lost)
		}
	}
	wg.Wait()
}
