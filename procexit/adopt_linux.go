package procexit

import "os"

// Adopt watches process pid through f, a pidfd of it (non-blocking) that
// an earlier image of this process held: see File.
func Adopt(pid int, f *os.File) *Process { return &Process{pid: pid, f: f} }

// File returns the pidfd the Process watches through, for an exec in
// place to hand over; it stays the Process's.
func (p *Process) File() *os.File { return p.f }
