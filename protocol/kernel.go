package protocol

// A kernelBuffer is the kernel's buffer between the writer and the
// client, seen from the writer's end: how much the client has not read
// yet, and how much more a write can leave there without waiting.
// probeKernelBuffer (kernel_linux.go, kernel_other.go) finds it, where the
// OS shows it: on Linux, for a pipe or a socket.
type kernelBuffer interface {
	// unread returns the bytes written that the client has not read.
	unread() (int, error)
	// room returns how many bytes a write can certainly leave in the
	// buffer without waiting, given unread; it may be 0 or less.
	room(unread int) int
}
