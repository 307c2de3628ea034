package protocol

// OutputSource is a terminal's output as the connection's writer reads it:
// a byte stream addressed by absolute offset (counting every byte ever
// written), of which the source holds a recent window. The supervisor's
// terminals implement it (an outputbuf.Ring does); the writer is its only
// caller.
//
// Concurrency: the methods are called from the writer's goroutine while
// the terminal's own goroutine writes; they must not block for longer than
// a memory copy. Watch's callback runs on the writing goroutine.
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
	// Watch registers fn to be called after every write. fn must not
	// block. The returned function unregisters it; fn is not called once
	// it has returned.
	Watch(fn func()) (unwatch func())
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
	// field), and chunks continue from there.
	// For a client that attaches to a running session (resume, replay).
	ReplaceOutput
)
