package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/peercred"
	"shellagent/protocol"
	"shellagent/supervisor"
)

// Why Serve returned, besides the cause of its context.
var (
	// ErrStopRequested: a client asked the daemon to stop (WantStop).
	ErrStopRequested = errors.New("stop requested")
	// ErrIdle: no session and no connection for the Server's IdleExit.
	ErrIdle = errors.New("idle")
)

// flushTimeout bounds how long a connection's last messages may take to
// reach a client that does not read, once the connection ends.
const flushTimeout = 200 * time.Millisecond

// lineTimeout and lineMost bound the line under way when a connection
// closes, after flushTimeout (see protocol.Conn.CloseBy, and awaitLine):
// a client that takes it gets that line whole, and no other. Once
// lineTimeout has passed, a client that has taken none of it for
// lineTimeout is left with a torn line; one that takes it slowly has
// until lineMost (a client kept off the CPU of a loaded machine while
// floods run was seen to need more than lineTimeout). Once a connection's
// answers are in (awaitAnswers, for a client whose input ended), closing
// it takes at most flushTimeout+lineMost, within an upgrade's wait for
// its connections (connsGone).
const (
	lineTimeout = time.Second
	lineMost    = 3 * time.Second
)

// A Server serves one Supervisor to every connection of a listener.
// Set its fields before Serve; Serve is called once.
type Server struct {
	// Supervisor holds the sessions. Its Config.Detached should be
	// supervisor.KeepDetached, or sessions end with their connection.
	Supervisor *supervisor.Supervisor
	// Options configure each connection's protocol.Conn.
	Options protocol.Options
	// Build is this daemon's build, as the hello says it: only a client of
	// the same build is served ACP.
	Build string
	// Socket is the socket's path, as Status reports it.
	Socket string
	// Log gets what happens to connections; slog.Default() if nil.
	Log *slog.Logger
	// IdleExit ends Serve (ErrIdle) once the Supervisor has held no
	// session and no connection has been open for this long; 0 never.
	IdleExit time.Duration
	// Stop closes every session, each with its kill grace, and returns
	// once they have closed; it is called when Serve ends, and once more
	// if a connection opened a session meanwhile. If nil,
	// Supervisor.Shutdown.
	Stop func(ctx context.Context) error
	// Upgrade lets a client upgrade the daemon in place (WantUpgrade);
	// nil refuses it.
	Upgrade *Upgrade

	started time.Time
	stopped chan struct{}  // closed once Stop has returned
	stopErr error          // what Stop returned; read after stopped
	wg      sync.WaitGroup // the connections' goroutines, and watchIdle's

	mu        sync.Mutex // guards what follows
	conns     map[*acpConn]struct{}
	closing   bool                    // no connection is served ACP any more
	upgrading bool                    // an upgrade is under way: no other one starts, and the daemon is not idle
	frozen    bool                    // the upgrade has passed its probe and closed the connections: no new one is served ACP
	thawed    chan struct{}           // made when frozen is set, closed when it is cleared (the upgrade failed)
	l         Listener                // what Serve accepts from
	idle      time.Time               // since when nothing is open; zero while something is
	stop      context.CancelCauseFunc // ends Serve
}

// acpConn is one connection served ACP.
type acpConn struct {
	nc   *net.UnixConn
	out  *os.File // the client's stdout, where the output goes; nil: nc
	in   *os.File // the client's stdin, where the requests come from; nil: nc
	conn *protocol.Conn
	kick chan struct{} // closed when the server ends the connection
	// watched is closed once watchClient has returned; nil without in.
	watched chan struct{}
}

// Serve accepts connections on l and serves each in its own goroutine
// until ctx ends, a client asks for a stop (ErrStopRequested), or the
// daemon has been idle for IdleExit (ErrIdle); it returns that cause. It
// then closes l, closes every session with Stop, sends each connection
// its last messages, closes them, and returns once every goroutine it
// started has ended.
func (s *Server) Serve(ctx context.Context, l Listener) error {
	if s.Log == nil {
		s.Log = slog.Default()
	}
	if s.Stop == nil {
		s.Stop = s.Supervisor.Shutdown
	}
	s.started, s.stopped, s.idle = time.Now(), make(chan struct{}), time.Now()
	s.conns = make(map[*acpConn]struct{})
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	s.mu.Lock()
	s.stop, s.l = stop, l
	s.mu.Unlock()

	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		s.accept(ctx, l)
	}()
	if s.IdleExit > 0 {
		s.wg.Go(func() {
			s.watchIdle(ctx)
		})
	}
	<-ctx.Done()
	l.Close() // Best effort: ends accept; the socket file goes with it.
	<-accepted
	s.shutdown()
	s.wg.Wait()
	if s.Supervisor.Len() > 0 {
		// A connection created a session while the others closed.
		if err := s.Stop(context.Background()); err != nil {
			s.Log.Warn("stop", "err", err)
		}
	}
	return context.Cause(ctx)
}

// accept accepts connections until ctx ends. A failed accept (out of
// descriptors) is retried after a pause, and logged as acceptLog says.
func (s *Server) accept(ctx context.Context, l Listener) {
	failures := acceptLog{log: s.Log}
	for {
		nc, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures.failure(time.Now(), err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		failures.success()
		s.wg.Go(func() {
			s.serve(nc)
		})
	}
}

// acceptLogEvery is how often a run of failed accepts is logged again.
const acceptLogEvery = 10 * time.Second

// acceptLog logs a run of failed accepts. Out of descriptors, accept
// fails ten times a second, and a line each filled the log (4 MB an
// hour): the first failure of a run is logged, then at most one line
// each acceptLogEvery with the failures since the last, and the accept
// that ends the run with the run's count.
type acceptLog struct {
	log    *slog.Logger
	failed int       // failures of the current run
	said   int       // of them, those a line counted
	at     time.Time // when the last line was
}

func (a *acceptLog) failure(now time.Time, err error) {
	a.failed++
	if a.failed == 1 || now.Sub(a.at) >= acceptLogEvery {
		a.log.Warn("accept failed: new connections wait in the socket's queue until it works again", "err", err, "failures", a.failed-a.said)
		a.said, a.at = a.failed, now
	}
}

func (a *acceptLog) success() {
	if a.failed > 0 {
		a.log.Info("accepting again", "failed_accepts", a.failed)
		a.failed, a.said = 0, 0
	}
}

// serve checks a new connection's peer, exchanges hellos and serves what
// the client wants. A panic while it does drops this connection only: it
// is logged with the peer and its stack, the connection is closed, and
// the daemon, its other connections and every session go on.
func (s *Server) serve(nc *net.UnixConn) {
	log := s.Log
	defer func() {
		if r := recover(); r != nil {
			log.Error("dropped a connection: serving it panicked", "panic", r, "stack", string(debug.Stack()))
			nc.Close() // Best effort: dropped.
		}
	}()
	cred, err := peercred.Peer(nc)
	if err != nil {
		s.Log.Warn("refused a connection", "err", err)
		nc.Close() // Best effort: refused.
		return
	}
	log = s.Log.With("peer", cred.PID)
	if cred.UID != os.Geteuid() {
		log.Warn("refused a connection from another user", "uid", cred.UID, "daemon uid", os.Geteuid())
		nc.Close() // Best effort: refused.
		return
	}
	s.awaitThaw()
	nc.SetDeadline(time.Now().Add(helloTimeout)) // Best effort: without it a silent peer holds a goroutine.
	if err := writeLine(nc, Hello{Shellagent: RelayVersion, Build: s.Build, Pid: os.Getpid(), Grace: s.Supervisor.LongestGrace().Milliseconds()}); err != nil {
		log.Warn("hello", "err", err)
		nc.Close() // Best effort: gone.
		return
	}
	hello, fds, r, err := readClientHello(nc)
	if err != nil {
		log.Warn("refused a connection", "err", err)
		nc.Close() // Best effort: refused.
		return
	}
	nc.SetDeadline(time.Time{}) // Best effort: as above.
	// The client's stdout and stdin, if it passed them along with an ACP
	// hello, as Dial does; any other descriptor is closed here.
	var out, in *os.File
	if hello.Want == WantACP || hello.Want == "" {
		out, in, fds = clientStdio(hello, fds)
	}
	closeAll(fds) // anything else sent along
	switch hello.Want {
	case WantACP, "":
		refused := true
		switch {
		case hello.Shellagent != RelayVersion || hello.Build != s.Build:
			log.Warn("refused a client of another build; upgrade this daemon in place (shellagent daemon upgrade) or stop it (shellagent daemon stop) to use the new one",
				"client build", hello.Build, "client relay version", hello.Shellagent, "daemon build", s.Build)
		case hello.Stdin && in == nil:
			log.Warn("refused a connection: its hello says its stdin comes along, and it did not", "descriptors", len(fds))
		default:
			refused = false
		}
		if refused {
			closeFile(out) // never written to, and in never read
			closeFile(in)
			nc.Close() // Best effort: refused.
			return
		}
		s.serveACP(log, nc, r, out, in)
	case WantStatus:
		s.answer(log, nc, s.status())
	case WantStop:
		before := s.Supervisor.Sessions()
		log.Info("stop requested")
		s.requestStop()
		<-s.stopped
		st := Stopped{Sessions: before}
		if s.stopErr != nil {
			st.Error = s.stopErr.Error()
		}
		s.answer(log, nc, st)
	case WantUpgrade:
		s.upgrade(log, nc, hello.Exe)
	default:
		log.Warn("refused a connection", "want", hello.Want)
		nc.Close() // Best effort: refused.
	}
}

// answer writes v as the connection's one line and closes it.
func (s *Server) answer(log *slog.Logger, nc *net.UnixConn, v any) {
	nc.SetWriteDeadline(time.Now().Add(helloTimeout)) // Best effort: a client that does not read loses its answer.
	if err := writeLine(nc, v); err != nil {
		log.Warn("answer", "err", err)
	}
	nc.Close() // Best effort: answered.
}

// clientStdio takes the client's stdout and stdin, in that order, out of
// fds, the descriptors sent with its ACP hello, as the hello says they
// come (Hello.Stdout, Hello.Stdin), and returns the rest, to be closed.
// Where the count is not the hello's, a stdout alone is not taken (the
// output goes on the connection, as before stdin could come along), and
// a stdin is not taken: serve refuses a hello that says one comes and
// finds none.
func clientStdio(hello Hello, fds []int) (out, in *os.File, rest []int) {
	switch {
	case !hello.Stdin && hello.Stdout && len(fds) == 1:
		return clientStdout(fds[0]), nil, nil
	case hello.Stdin && hello.Stdout && len(fds) == 2:
		return clientStdout(fds[0]), clientStdin(fds[1]), nil
	case hello.Stdin && !hello.Stdout && len(fds) == 1:
		return nil, clientStdin(fds[0]), nil
	}
	return nil, nil, fds
}

// clientStdin makes fd, a client's stdin, the File the connection reads
// its requests from: non-blocking, in the runtime poller, so that closing
// it ends a read that waits for the next request (watchClient). The
// client passes a pipe as an open file of its own (OwnPipe), so that
// O_NONBLOCK is set on that only; a socket cannot be opened anew, and
// O_NONBLOCK is then set on the open file the client's process shares,
// as for its stdout, which it gives back when it exits.
func clientStdin(fd int) *os.File {
	unix.SetNonblock(fd, true) // Best effort: a blocking pipe is read as well, but the relay's end would not end the read.
	return os.NewFile(uintptr(fd), "client stdin")
}

// clientInput reads the requests of a client that handed its stdin: its
// stdin, closed by watchClient when the client goes away, which is then
// the end of the input, as a closed socket is for a client whose requests
// come on the socket.
type clientInput struct{ f *os.File }

func (i clientInput) Read(p []byte) (int, error) {
	n, err := i.f.Read(p)
	if errors.Is(err, os.ErrClosed) {
		err = io.EOF
	}
	return n, err
}

// watchClient waits for the end of the connection of a client that
// handed its stdin, which sends nothing more on it (anything it does is
// dropped): the client gone, or close closing it. It then closes the
// client's stdin, which ends the connection's read as the client's end
// of the socket would, so that its sessions are detached whatever ends
// the client: its stdin, its exit, a kill, or a stop that leaves the
// stdin's writer (an editor) open.
func watchClient(c *acpConn, rest io.Reader) {
	defer close(c.watched)
	io.Copy(io.Discard, rest) // Best effort: any end is the end.
	c.in.Close()              // Best effort: ends the connection's read, if one waits.
}

// clientStdout makes fd, a client's stdout, the File the connection
// writes to: non-blocking, in the runtime poller, so that closing it ends
// a write that a client that does not read has blocked. O_NONBLOCK is
// set on the open file that the client's process shares: the client
// passes only a pipe or a socket of its own, never a terminal, and writes
// nothing to it itself.
func clientStdout(fd int) *os.File {
	unix.SetNonblock(fd, true) // Best effort: a blocking pipe works as well, but for that close.
	return os.NewFile(uintptr(fd), "client stdout")
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close() // Best effort: nothing was written.
	}
}

// awaitThaw holds a connection that comes while an upgrade in place
// hands the daemon over (frozen), before the daemon's hello, until the
// upgrade ends. If the new image takes over, the connection closes at
// its exec, before any hello, and the client dials again (Connect does):
// the new image answers it. If the upgrade fails, it is served here as
// usual. (Served at once, an ACP connection had its hello and was then
// closed, and its relay gave up.)
func (s *Server) awaitThaw() {
	s.mu.Lock()
	thawed := s.thawed
	if !s.frozen {
		thawed = nil
	}
	s.mu.Unlock()
	if thawed != nil {
		<-thawed
	}
}

// serveACP serves ACP on nc until the client goes away or the server ends
// the connection, then detaches the client's sessions. The client's
// requests are read from in, its stdin, if it passed it, else from r,
// what follows its hello on nc; the output goes to out, the client's stdout
// if it passed it, else to nc.
func (s *Server) serveACP(log *slog.Logger, nc *net.UnixConn, r io.Reader, out, in *os.File) {
	c := &acpConn{nc: nc, out: out, in: in, kick: make(chan struct{})}
	s.mu.Lock()
	if s.closing || s.frozen {
		s.mu.Unlock()
		closeFile(out)
		closeFile(in)
		nc.Close() // Best effort: the daemon is stopping, or handing over to a new image.
		return
	}
	s.conns[c] = struct{}{}
	s.idle = time.Time{}
	s.mu.Unlock()
	defer s.close(c) // also after a panic (serve logs it)
	var w io.Writer = nc
	if out != nil {
		w = out
	}
	if in != nil {
		c.watched = make(chan struct{})
		go watchClient(c, r)
		r = clientInput{in}
	}
	log.Info("connected", "output to its stdout", out != nil, "input from its stdin", in != nil)

	opts := s.Options
	opts.Log = log
	opts.Observer = s.Supervisor.Checks() // each connection checks its own client
	c.conn = protocol.NewConn(r, w, s.Supervisor, opts)
	kicked := false
	defer func() {
		if !kicked {
			// Gone, or serving it panicked: its sessions run on without it.
			if err := s.Supervisor.Detach(context.Background(), c.conn.Client()); err != nil {
				log.Warn("detach", "err", err)
			}
			log.Info("disconnected; its sessions are detached")
			s.awaitAnswers(log, c.conn)
		}
	}()
	select {
	case <-c.conn.Done():
	case <-c.kick:
		kicked = true
	}
}

// awaitAnswers waits until conn, whose input has ended, has answered the
// requests it read (a session/close stops the session's work first), for
// at most the longest kill grace in use and answerSlack: the daemon
// answers what came before the end of a client's input, then closes.
func (s *Server) awaitAnswers(log *slog.Logger, conn *protocol.Conn) {
	select {
	case <-conn.Answered():
	case <-time.After(s.Supervisor.LongestGrace() + answerSlack):
		log.Warn("closing with requests unanswered", "waited", s.Supervisor.LongestGrace()+answerSlack)
	}
}

// answerSlack is how long, beyond the longest kill grace in use,
// awaitAnswers waits for the answers to a client's last requests.
const answerSlack = 2 * time.Second

// close sends what is queued on c, for at most flushTimeout, then the
// line under way (see lineTimeout), closes it, and forgets it.
func (s *Server) close(c *acpConn) {
	cut := time.Now().Add(flushTimeout)
	flushed := make(chan struct{})
	go func() {
		if c.conn != nil { // nil: NewConn panicked
			c.conn.CloseBy(cut)
		}
		close(flushed)
	}()
	if !awaitLine(c.conn, cut, flushed) {
		s.Log.Warn("client is not reading; closing its connection in the middle of a line")
	}
	c.nc.Close() // Best effort: ends a write to a client that does not read.
	if c.watched != nil {
		// Ended by the close of nc; it closes c.in, and the descriptor is
		// gone when it is done (the connection's read may have returned
		// before: the last of the two lets it go). Then the stdout, whose
		// end tells the client that both are let go.
		<-c.watched
	}
	closeFile(c.out)
	<-flushed
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// awaitLine waits for flushed, the end of conn's output, whose line under
// way goes on past cut: until lineTimeout after cut, then for as long as
// the client takes some of it within each lineTimeout, up to lineMost
// after cut. It reports whether the output ended.
func awaitLine(conn *protocol.Conn, cut time.Time, flushed <-chan struct{}) bool {
	look := time.NewTicker(lineTimeout / 10)
	defer look.Stop()
	for {
		select {
		case <-flushed:
			return true
		case now := <-look.C:
			if now.After(cut.Add(lineMost)) || now.After(cut.Add(lineTimeout)) && conn != nil && conn.Idle(lineTimeout) {
				return false
			}
		}
	}
}

// requestStop ends Serve with ErrStopRequested.
func (s *Server) requestStop() {
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	stop(ErrStopRequested)
}

// shutdown closes every session, then every connection: each gets its
// sessions' final updates first. A connection that is still in its hello
// is not served any more.
func (s *Server) shutdown() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.stopErr = s.Stop(context.Background())
	close(s.stopped)
	s.mu.Lock()
	for c := range s.conns {
		close(c.kick)
	}
	s.mu.Unlock()
}

// watchIdle ends Serve with ErrIdle once the Supervisor has held no
// session and no connection has been open for IdleExit.
func (s *Server) watchIdle(ctx context.Context) {
	tick := time.NewTicker(min(max(s.IdleExit/10, 50*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sessions := s.Supervisor.Len()
		s.mu.Lock()
		switch {
		case sessions > 0 || s.upgrading:
			s.idle = time.Time{}
		case len(s.conns) == 0 && s.idle.IsZero():
			s.idle = time.Now()
		}
		idle := !s.idle.IsZero() && time.Since(s.idle) >= s.IdleExit
		stop := s.stop
		s.mu.Unlock()
		if idle {
			s.Log.Info("exiting: no session and no connection", "for", s.IdleExit)
			stop(ErrIdle)
			return
		}
	}
}

// status is the Status answer.
func (s *Server) status() Status {
	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	return Status{
		Pid: os.Getpid(), Build: s.Build, Socket: s.Socket, Started: s.started,
		RSS: rss(), Connections: conns, Sessions: s.Supervisor.Sessions(),
		Procs: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(),
	}
}

// rss returns this process's resident memory in bytes, or -1.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}
