package contain

import (
	"bytes"
	"encoding/binary"
)

// parseProcargs2 splits what macOS's sysctl KERN_PROCARGS2 gives of a
// process (the strings at the top of its initial stack) into its
// arguments and its environment, each NUL-separated: an int32 argc, the
// executable's path, NUL padding, argc arguments, then the environment,
// which an empty string ends (the "apple" strings follow it). A buffer
// that holds fewer than argc arguments is not understood (ok false): the
// kernel gives the tail of an area too large for it.
//
// It is here, not in proc_darwin.go, so that TestParseProcargs2 runs where
// the tests run.
func parseProcargs2(b []byte) (args, env []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	argc := int(int32(binary.LittleEndian.Uint32(b)))
	rest := b[4:]
	i := bytes.IndexByte(rest, 0)
	if i < 0 || argc < 0 {
		return nil, nil, false
	}
	rest = bytes.TrimLeft(rest[i:], "\x00")
	n := 0
	for range argc {
		i := bytes.IndexByte(rest[n:], 0)
		if i < 0 {
			return nil, nil, false
		}
		n += i + 1
	}
	args, rest = rest[:n], rest[n:]
	for n = 0; n < len(rest) && rest[n] != 0; {
		i := bytes.IndexByte(rest[n:], 0)
		if i < 0 {
			n = len(rest)
			break
		}
		n += i + 1
	}
	return args, rest[:n], true
}
