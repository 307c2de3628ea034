//go:build !linux

// What this file does: sees no kernel buffer outside Linux (no
// F_GETPIPE_SZ, and no TIOCINQ or SIOCOUTQ as Linux has them), so the
// writer writes in pieces of fixedPiece and counts a client's progress by
// the bytes its writes take, as it does on Linux for an output that is
// neither a pipe nor a socket. TestProbeKernelBuffer's last case and the
// writer's tests on a bytes.Buffer cover that path on Linux.

package protocol

import "io"

// probeKernelBuffer finds no buffer here.
func probeKernelBuffer(io.Writer) kernelBuffer { return nil }
