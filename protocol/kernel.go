package protocol

// A kernelBuffer is the kernel's buffer between the writer and the
// client, seen from the writer's end: how much the client has not read
// yet, and how much more a write can leave there without waiting.
// probeKernelBuffer (kernel_linux.go, kernel_other.go) finds it, where the
// OS shows it: on Linux, for a pipe or a socket. It belongs to the
// writer's goroutine, but for unread, which any goroutine may call.
type kernelBuffer interface {
	// unread returns the bytes written that the client has not read.
	unread() (int, error)
	// room returns how many bytes a write may leave in the buffer, given
	// unread: it can certainly leave them without waiting, and they keep
	// the buffer within the size fit asked for. It may be 0 or less.
	room(unread int) int
	// fit sizes the buffer for a client that takes bps bytes a second
	// (see pipeBuffer.fit), where the buffer can be sized.
	fit(bps float64)
	// holding reports whether the buffer is larger than fit asked for
	// (a smaller size waits until the client has read down to it): a
	// write past room would then be taken at once, not wait for the
	// client, so the writer waits itself (peer.hold). It returns false
	// once the client can no longer read, so that a write finds that out.
	holding() bool
}
