package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// execNew execs exe in place of this image, handing it the listener, the
// lock, the requester's connection nc and the Host's state and files, all
// named by a manifest in a memfd. It returns only if the exec failed,
// having closed every descriptor it made.
func (s *Server) execNew(nc *net.UnixConn, exe string, state []byte, files []*os.File) error {
	mfd, fds, err := s.handOver(nc, state, files)
	if err != nil {
		return err
	}
	argv := append([]string{exe, "daemon", "--upgrade-state=" + strconv.Itoa(mfd)}, s.Upgrade.Args...)
	if err := execKeeping(exe, argv, fds); err != nil {
		closeAll(fds)
		return err
	}
	return nil
}

// handOver duplicates what the new image takes over (close-on-exec, for
// execKeeping to clear) and writes their manifest to a memfd, mfd; fds
// holds every duplicate, mfd last. On an error none is left open.
func (s *Server) handOver(nc *net.UnixConn, state []byte, files []*os.File) (mfd int, fds []int, err error) {
	defer func() {
		if err != nil {
			closeAll(fds)
			fds = nil
		}
	}()
	dup := func(what string, c syscall.Conn) (int, error) {
		fd, err := dupOf(c)
		if err != nil {
			return -1, fmt.Errorf("hand over %s: %w", what, err)
		}
		fds = append(fds, fd)
		return fd, nil
	}
	m := manifest{Version: StateVersion, From: s.Build, Socket: s.Socket, State: state}
	switch l := s.listener().(type) {
	case *Socket:
		l.mu.Lock()
		ul, id := l.l, l.id
		l.mu.Unlock()
		m.SocketID = [2]uint64{id.dev, id.ino}
		if m.Listener, err = dup("the listening socket", ul); err != nil {
			return -1, fds, err
		}
	case *net.UnixListener:
		m.Activated = true
		if m.Listener, err = dup("the listening socket", l); err != nil {
			return -1, fds, err
		}
	default:
		return -1, fds, fmt.Errorf("hand over the listening socket: a %T cannot be handed over", l)
	}
	s.Upgrade.Lock.mu.Lock()
	lf := s.Upgrade.Lock.f
	s.Upgrade.Lock.mu.Unlock()
	if m.Lock, err = dup("the lock", lf); err != nil {
		return -1, fds, err
	}
	if m.Requester, err = dup("the requester's connection", nc); err != nil {
		return -1, fds, err
	}
	for i, f := range files {
		fd, err := dup(fmt.Sprintf("file %d of the sessions (%s)", i, f.Name()), f)
		if err != nil {
			return -1, fds, err
		}
		h := handedFile{FD: fd}
		if pid, ok := pidfdPid(fd); ok {
			if start, ok := startTime(pid); ok {
				h.Pid, h.Start = pid, start
			}
		}
		m.Files = append(m.Files, h)
	}
	m.Execed = time.Now()
	b, err := json.Marshal(m)
	if err != nil {
		return -1, fds, fmt.Errorf("the upgrade's manifest: %w", err)
	}
	if mfd, err = memfd("shellagent-upgrade", b); err != nil {
		return -1, fds, err
	}
	return mfd, append(fds, mfd), nil
}

// dupOf duplicates c's descriptor, close-on-exec, above stderr, without
// touching the original's blocking mode (as File().Fd() would).
func dupOf(c syscall.Conn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	cerr := rc.Control(func(raw uintptr) { fd, err = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 3) })
	if cerr != nil {
		return -1, cerr
	}
	return fd, err
}

// memfd returns a memfd, close-on-exec, that holds b, read from its start.
func memfd(name string, b []byte) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	for rest := b; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			unix.Close(fd) // Best effort: never handed over.
			return -1, fmt.Errorf("write the upgrade's manifest: %w", err)
		}
		rest = rest[n:]
	}
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		unix.Close(fd) // Best effort: as above.
		return -1, fmt.Errorf("seek the upgrade's manifest: %w", err)
	}
	return fd, nil
}

// execKeeping execs argv with exactly fds kept open besides stdio: their
// close-on-exec is cleared under syscall.ForkLock, so that no command
// started meanwhile inherits them, and set again if the exec fails.
func execKeeping(exe string, argv []string, fds []int) error {
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	var err error
	for _, fd := range fds {
		if _, e := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); e != nil {
			err = fmt.Errorf("keep descriptor %d open across exec: %w", fd, e)
			break
		}
	}
	if err == nil {
		err = syscall.Exec(exe, argv, os.Environ())
		err = fmt.Errorf("exec %s: %w", exe, err)
	}
	for _, fd := range fds {
		unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC) // Best effort: closed by the caller next.
	}
	return err
}

// pidfdPid returns the pid that the pidfd fd refers to; ok is false when
// fd is not a pidfd, or its process has been reaped (Pid -1).
func pidfdPid(fd int) (pid int, ok bool) {
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || target != "anon_inode:[pidfd]" {
		return 0, false
	}
	info, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(info) {
		if v, found := bytes.CutPrefix(line, []byte("Pid:")); found {
			pid, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			return pid, err == nil && pid > 0
		}
	}
	return 0, false
}

// startTime returns process pid's start time, in clock ticks since boot
// (field 22 of /proc/PID/stat): with the pid, it names one process.
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	const starttime = 22 - 3 // the fields after the command start at field 3
	if len(f) <= starttime {
		return 0, false
	}
	v, err := strconv.ParseUint(string(f[starttime]), 10, 64)
	return v, err == nil
}

// Resumed is what the new image of an upgrade got from the old one.
type Resumed struct {
	// From is the old image's build.
	From string
	// Listener is the listening socket, as it was: a Socket to Keep, or,
	// when Activated, systemd's.
	Listener  Listener
	Activated bool
	// Lock is the socket's lock.
	Lock *Lock
	// State and Files are what the Host's Freeze returned, the files as
	// new descriptors (close-on-exec) in the same order. Ended holds the
	// indexes in Files of the process handles whose process has been
	// reaped or is not the one frozen any more.
	State []byte
	Files []*os.File
	Ended []int
	// Execed is when the old image was about to exec this one.
	Execed time.Time

	requester *net.UnixConn
}

// Resume reads the manifest that the old image handed over in the memfd
// fd (daemon --upgrade-state=FD) and takes back what it names: the
// listener and the lock as they were (no unlink, no new bind), the
// requester's connection, and the Host's files, each process handle
// checked against the process it was frozen with. Every descriptor it
// names is made close-on-exec again. On an error the process cannot
// serve: it should tell the requester (Answer, if r is not nil) and exit.
func Resume(fd int) (r *Resumed, err error) {
	f := os.NewFile(uintptr(fd), "upgrade state")
	b, err := io.ReadAll(f)
	f.Close() // Best effort: read.
	if err != nil {
		return nil, fmt.Errorf("read the upgrade's state (descriptor %d): %w", fd, err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("the upgrade's state: %w", err)
	}
	if m.Version != StateVersion {
		return nil, fmt.Errorf("the upgrade's state is version %d; this build reads %d", m.Version, StateVersion)
	}
	named := []int{m.Listener, m.Lock, m.Requester}
	for _, h := range m.Files {
		named = append(named, h.FD)
	}
	for _, fd := range named {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
			return nil, fmt.Errorf("the upgrade's descriptor %d: %w", fd, err)
		}
	}
	r = &Resumed{From: m.From, Activated: m.Activated, State: m.State, Execed: m.Execed}
	if c, err := fileConn(m.Requester); err == nil {
		r.requester = c
	}
	r.Lock = &Lock{f: os.NewFile(uintptr(m.Lock), lockPath(m.Socket))}
	for i, h := range m.Files {
		r.Files = append(r.Files, os.NewFile(uintptr(h.FD), "handed over "+strconv.Itoa(i)))
		if h.Pid == 0 {
			continue
		}
		if pid, ok := pidfdPid(h.FD); !ok || pid != h.Pid {
			r.Ended = append(r.Ended, i)
		} else if start, ok := startTime(pid); !ok || start != h.Start {
			r.Ended = append(r.Ended, i)
		}
	}
	lf := os.NewFile(uintptr(m.Listener), "listener")
	l, err := net.FileListener(lf)
	lf.Close() // Best effort: l holds its own descriptor.
	if err != nil {
		return r, fmt.Errorf("the listening socket handed over: %w", err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		l.Close() // Best effort: refused.
		return r, fmt.Errorf("the listening socket handed over is %s, not unix", l.Addr().Network())
	}
	if m.Activated {
		r.Listener = ul
		return r, nil
	}
	ul.SetUnlinkOnClose(false) // Socket.Close removes the file, by its id
	// The old image's claim went with its exec: take it again.
	claim, err := claimPath(m.Socket)
	if err != nil {
		ul.Close() // Best effort: refused.
		return r, err
	}
	r.Listener = &Socket{path: m.Socket, claim: claim, l: ul, id: fileID{m.SocketID[0], m.SocketID[1]}}
	return r, nil
}

// fileConn makes the inherited descriptor fd a *net.UnixConn.
func fileConn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "requester")
	c, err := net.FileConn(f)
	f.Close() // Best effort: c holds its own descriptor.
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close() // Best effort: not ours.
		return nil, errors.New("the requester's connection is not a unix socket")
	}
	return uc, nil
}

// Answer tells the requester of the upgrade that build serves now, or,
// with err, why the new image could not take over; then closes its
// connection. Later calls do nothing.
func (r *Resumed) Answer(build string, err error) {
	if r == nil || r.requester == nil {
		return
	}
	up := Upgraded{Pid: os.Getpid(), Build: build}
	if err != nil {
		up.Error = err.Error()
	}
	r.requester.SetWriteDeadline(time.Now().Add(helloTimeout)) // Best effort: a requester that does not read loses its answer.
	writeLine(r.requester, up)                                 // Best effort: a requester that left loses its answer.
	r.requester.Close()                                        // Best effort: answered.
	r.requester = nil
}

// manifest is what the old image hands the new one, besides the
// descriptors it names: one JSON document in a memfd.
type manifest struct {
	Version   int
	From      string // the old image's build
	Socket    string
	Listener  int       // the listening socket's descriptor
	SocketID  [2]uint64 // the socket file it is bound to (device, inode); zero when Activated
	Activated bool      // the listener is systemd's: not kept, never unlinked
	Lock      int
	Requester int // the connection that asked for the upgrade
	State     []byte
	Files     []handedFile
	Execed    time.Time // when the old image was about to exec the new one
}

// handedFile is one of the Host's files: its descriptor in the new image
// and, for a process handle (pidfd), the process it was frozen with.
type handedFile struct {
	FD    int
	Pid   int    `json:",omitempty"`
	Start uint64 `json:",omitempty"` // the process's start time (/proc/PID/stat)
}

// listener returns the listener Serve was given.
func (s *Server) listener() Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l
}
