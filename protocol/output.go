package protocol

// OutputSource is a terminal's output as the connection's writer reads it:
// a byte stream addressed by absolute offset (counting every byte ever
// written), of which the source holds a recent window. The supervisor's
// terminals implement it (over an outputbuf.Ring); the writer is its only
// caller.
//
// Concurrency: the methods are called from the writer's goroutine, and
// Follow from whichever goroutine queues the terminal's first update, while
// the terminal's own goroutine writes. None may block for longer than a
// memory copy.
type OutputSource interface {
	// Total returns the offset just past the last byte written.
	Total() int64
	// ReadAt copies bytes starting at offset off into p and returns how
	// many it copied and the offset where they start: start > off when the
	// bytes from off were overwritten before they were read. n is 0 when
	// nothing is held at or after off.
	ReadAt(p []byte, off int64) (n int, start int64)
	// AppendSnapshot appends everything the source holds to dst, as one
	// consistent copy, and returns the offset just past it.
	AppendSnapshot(dst []byte) (data []byte, end int64)
	// Follow registers a reader that has taken none of the bytes the
	// source holds and does not hold it yet. notify is called after every
	// write, on the writing goroutine; it does not block.
	Follow(notify func()) OutputFollower
}

// OutputFollower is the writer's hold on one OutputSource: flow control
// like a terminal's. While it holds, the source's writer (the goroutine
// that drains the PTY) waits rather than overwrite a byte the follower has
// not taken, so the kernel blocks the child's writes; once the follower is
// a full buffer behind, that writer waits until it is down to a low
// watermark (half the buffer). The connection's writer holds while the
// client makes progress and lets go when it stalls (Options.StallTimeout).
// The methods may be called from any goroutine.
type OutputFollower interface {
	// Taken records that every byte before off was taken (sent, or
	// superseded by a replacement). Offsets only move forward.
	Taken(off int64)
	// Hold sets whether the source's writer must wait for this follower.
	Hold(on bool)
	// Stop ends following: no more holding; notify is not called by a
	// write that starts after Stop returns.
	Stop()
}

// OutputMode says how a terminal_update relates to the terminal's output
// on the wire.
type OutputMode int

const (
	// StreamOutput: output written before the update goes out as
	// terminal_output_chunk before it; output written after, as chunks
	// after it. The first update of a terminal starts the stream (with
	// everything the source holds), one with an exitStatus ends it.
	StreamOutput OutputMode = iota
	// ReplaceOutput: the update carries the source's content at the moment
	// it is written, as a replacement of the client's copy (the output
	// field, with _meta.shellagent.droppedBytes when the source no longer
	// holds the terminal's first bytes), and chunks continue from there.
	// For a client that attaches to a running session (resume, replay).
	ReplaceOutput
)
