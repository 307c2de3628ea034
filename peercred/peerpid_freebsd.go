// What this file does: tells no pid: FreeBSD keeps it in xucred's cr_pid,
// which golang.org/x/sys does not expose.

package peercred

func peerPID(int) int { return 0 }
