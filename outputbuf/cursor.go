package outputbuf

// A Reader serves bytes by absolute offset as Ring.ReadAt does: n bytes
// copied into p, starting at start, which is past off when the bytes
// from off are no longer held. A *Ring is one.
type Reader interface {
	ReadAt(p []byte, off int64) (n int, start int64)
}

// A Cursor reads a ring's output in order, from an offset on, some time
// after it was written: each Next returns the next bytes the ring holds
// past the cursor and how many bytes before them the cursor passed over
// (the ring overwrote them before they were read, or Skip skipped them).
// It is the one way to follow a ring's bytes without holding it (a
// service's log, the history, a wait's line scan): a reader that falls
// behind loses bytes, and is told how many, but never makes Write wait.
//
// A Cursor belongs to one goroutine. Its Next may run while the ring's
// writer writes: it takes the ring's lock for one copy of at most len(p)
// bytes, as ReadAt does. Its methods allocate nothing. The zero Cursor
// reads from offset 0.
type Cursor struct {
	off     int64 // the first byte neither read nor passed over
	skipped int64 // bytes Skip passed over that Next has not reported
}

// CursorAt returns a cursor whose first byte to read is at offset off.
func CursorAt(off int64) Cursor { return Cursor{off: off} }

// Offset returns the offset of the next byte the cursor reads: every
// byte before it was read or passed over.
func (c *Cursor) Offset() int64 { return c.off }

// Skip moves the cursor on to offset to without reading the bytes before
// it: the next Next counts them as passed over (lost). A to at or before
// the cursor's offset changes nothing.
func (c *Cursor) Skip(to int64) {
	if to > c.off {
		c.skipped += to - c.off
		c.off = to
	}
}

// Next copies into p the bytes src holds from the cursor's offset on, at
// most len(p) of them, and moves the cursor past them. lost is how many
// bytes just before them the cursor passed over: skipped, or no longer
// held by src. n is 0 when src holds nothing at or past the offset (or p
// is empty); the cursor still moves past what src lost, and lost says
// how much.
func (c *Cursor) Next(src Reader, p []byte) (n int, lost int64) {
	n, start := src.ReadAt(p, c.off)
	start = max(start, c.off)
	lost = c.skipped + start - c.off
	c.skipped, c.off = 0, start+int64(n)
	return n, lost
}
