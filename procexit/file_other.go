//go:build !linux

package procexit

import "os"

// File returns nil: only a Linux pidfd can be handed over.
func (p *Process) File() *os.File { return nil }
