package journal

import "slices"

// A tailBuf keeps the last bytes written to it, in no more memory than
// it keeps: it grows by doubling up to them, then wraps. Load reads a
// flooded terminal's lines, many times its scrollback, into one: it
// allocates at most twice the scrollback.
type tailBuf struct {
	b  []byte
	at int // once b is full: where the oldest byte is, and the next goes
}

// write keeps the last size bytes of what t kept and d.
func (t *tailBuf) write(d []byte, size int) {
	d = tail(d, size)
	if len(t.b) < size {
		if need := len(t.b) + len(d); need > cap(t.b) {
			b := make([]byte, len(t.b), min(size, max(need, 2*cap(t.b))))
			copy(b, t.b)
			t.b = b
		}
		n := min(len(d), size-len(t.b))
		t.b, d = append(t.b, d[:n]...), d[n:]
	}
	for len(d) > 0 {
		n := copy(t.b[t.at:], d)
		t.at, d = (t.at+n)%size, d[n:]
	}
}

// bytes returns what t keeps, oldest first, rotating t's memory in place.
func (t *tailBuf) bytes() []byte {
	if t.at > 0 {
		slices.Reverse(t.b[:t.at])
		slices.Reverse(t.b[t.at:])
		slices.Reverse(t.b)
		t.at = 0
	}
	return t.b
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
