package protocol

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStallTimeout is how long a connection may accept no bytes before
// the writer stops holding the terminals back.
const DefaultStallTimeout = time.Second

// Sizes of what the writer gathers, as chosen by a peer.
const (
	// maxChunk is the most terminal output one terminal_output_chunk
	// carries; minChunk the least a chunk is cut to for a slow peer.
	maxChunk = 64 << 10
	minChunk = 4 << 10
	// maxBatch is the most encoded output the writer gathers before it
	// writes, however fast the peer.
	maxBatch = 256 << 10
	// lineTime is about how long the peer may take for one chunk or
	// batch: what a control message queued behind it waits.
	lineTime = 50 * time.Millisecond
	// fixedPiece is the most bytes per write to an output whose kernel
	// buffer cannot be seen (see kernelBuffer): a write that returns is
	// the only progress seen there.
	fixedPiece = 16 << 10
	// page is the unit of a pipe's buffer.
	page = 4 << 10
	// firstRate is the rate assumed until the first figure: a slow
	// client's, since small chunks cost a fast client nothing until it
	// has taken rateBytes, while big ones would hold a slow client's
	// answers for seconds.
	firstRate = 100e3
)

// A peer is a writer's output: it writes to the client in pieces whose
// progress can be seen, says whether the client is stalled, and sizes
// what the writer gathers to what the client takes.
//
// Progress is any byte the client takes: a write that accepts bytes, or
// the kernel's buffer for the client (a pipe or a socket, see
// kernelBuffer) holding fewer unread bytes than at the last look. The
// client is stalled when a write is under way and there has been no
// progress for the stall timeout, and stops being stalled at the next
// progress. How long one blocked Write takes is neither: a Write of
// 256 KiB to a pipe whose reader takes 128 KiB every 0.5 s blocks for over
// a second though the reader never paused, and the kernel does not say
// how much of a blocked Write it has taken. So a write never blocks with
// more than a page to go where the buffer can be seen: it is cut to the
// room the buffer has, or to one page when it is full (a page is written
// at once, as soon as the client frees one), and while it blocks the
// unread count only goes down as the client reads. A client that takes a
// byte every 0.9 s is never stalled; one that takes nothing for the stall
// timeout is. Where the buffer cannot be seen, writes are cut to
// fixedPiece and each one that returns is progress.
//
// Sizes (see sizes) follow the rate at which the client takes bytes while
// the writer waits for it, so that a chunk or a batch takes the client
// about lineTime: a control message that arrives waits for little more
// than the line being written and the kernel's buffer. So does the
// kernel's buffer, where it can be sized (kernelBuffer.fit, a pipe on
// Linux): grown for a fast client, shrunk again when it slows. While the
// buffer is larger than the size asked for, the writer holds (hold)
// instead of filling it, and the stall rule applies to the hold as to a
// blocked write.
//
// Concurrency: write, sizes and the fields below mu belong to the
// writer's goroutine; the stall timer runs tick; stalled may be called
// from any goroutine. changed is called without p.mu, by write or by the
// timer, after stalled may have changed: it must ask stalled rather than
// assume a direction, since two calls may race.
type peer struct {
	out     io.Writer
	kernel  kernelBuffer // nil: the output's buffer cannot be seen
	changed func()
	// cut, if not zero, is when the output must end (Unix nanoseconds,
	// see cutAt); set from any goroutine.
	cut atomic.Int64

	mu    sync.Mutex // guards m and the timer
	m     stallMeter
	timer *time.Timer
	armed bool // the timer will run tick

	// Owned by the writer's goroutine.
	rate rateMeter
	// bound is at least the client's unread bytes: those at the last
	// look, plus what was written since (the client only takes bytes
	// out). While it leaves a page of room, a write cannot wait, and
	// needs no look. -1: look before the next write.
	bound int
}

// newPeer returns the peer for out with the given stall timeout
// (DefaultStallTimeout if not positive).
func newPeer(out io.Writer, timeout time.Duration, changed func()) *peer {
	if timeout <= 0 {
		timeout = DefaultStallTimeout
	}
	return &peer{out: out, kernel: probeKernelBuffer(out), changed: changed, m: stallMeter{timeout: timeout}, bound: -1}
}

// errCut is what write returns once the output has ended at its cut.
var errCut = errors.New("the output ended at its deadline")

// cutAt makes the output end at t: from then on, write finishes the line
// under way, if any, and writes nothing more (errCut). So a process that
// must exit by a deadline leaves its client whole lines only, as long as
// the client takes the rest of the line under way before the process
// exits: a line written in pieces to a client that reads slowly is never
// left torn because the deadline fell between two pieces.
func (p *peer) cutAt(t time.Time) { p.cut.Store(t.UnixNano()) }

// past reports whether the cut has passed.
func (p *peer) past() bool {
	cut := p.cut.Load()
	return cut != 0 && time.Now().UnixNano() >= cut
}

// write writes b, which holds whole lines, in pieces, watching each (see
// peer). It returns the first error of a write, or errCut once the cut
// has passed and no line is under way.
func (p *peer) write(b []byte) error {
	midLine := false // a line of b is partly written
	for len(b) > 0 {
		unread, room := p.look()
		past := p.past()
		if past && !midLine {
			return errCut
		}
		if room < page && p.kernel != nil && p.kernel.holding() {
			p.hold(unread)
			continue
		}
		k := min(len(b), max(room, page))
		if past {
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				k = min(k, i+1)
			}
		}
		start := time.Now()
		p.begin(start, unread)
		n, err := p.out.Write(b[:k])
		end := time.Now()
		p.end(end, n)
		p.rate.add(n, end.Sub(start), unread)
		if p.bound >= 0 {
			p.bound += n
		}
		if p.rate.due() {
			after := -1
			if p.kernel != nil {
				if u, err := p.kernel.unread(); err == nil {
					after = u
				}
			}
			if p.rate.figure(after) && p.kernel != nil {
				p.kernel.fit(p.rate.bps)
			}
		}
		if err != nil {
			return err
		}
		if n > 0 {
			midLine = b[n-1] != '\n'
		}
		b = b[n:]
	}
	return nil
}

// look returns the client's unread bytes (-1 if unknown or not looked
// at) and the most bytes the next write may carry. The most may be less
// than a page, only where the buffer can be seen and was looked at: a
// page is then written anyway (and waits in the kernel for the client to
// free one), unless the buffer is holding.
func (p *peer) look() (unread, room int) {
	if p.kernel == nil {
		return -1, fixedPiece
	}
	if p.bound >= 0 {
		if room := p.kernel.room(p.bound); room >= page {
			return -1, room
		}
	}
	unread, err := p.kernel.unread()
	if err != nil {
		p.bound = -1
		return -1, fixedPiece
	}
	p.bound = unread
	return unread, p.kernel.room(unread)
}

// Looks while the writer holds (see hold): the first after holdFirst,
// each later one twice as late, up to holdMost.
const (
	holdFirst = time.Millisecond
	holdMost  = 16 * time.Millisecond
)

// hold waits while the kernel's buffer is holding (see
// kernelBuffer.holding), as a write to a full buffer would, given the
// client's unread bytes: the stall rule and the rate count the wait as a
// write that took nothing, and the bytes the client reads meanwhile as
// progress.
func (p *peer) hold(unread int) {
	start := time.Now()
	p.begin(start, unread)
	for d := holdFirst; ; d = min(2*d, holdMost) {
		time.Sleep(d)
		u, err := p.kernel.unread()
		if err != nil || p.kernel.room(u) >= page || !p.kernel.holding() {
			break
		}
	}
	end := time.Now()
	p.end(end, 0)
	p.rate.add(0, end.Sub(start), unread)
	p.bound = -1
}

// begin notes that a write starts at now.
func (p *peer) begin(now time.Time, unread int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m.start(now, unread)
	if !p.armed {
		p.armed = true
		if p.timer == nil {
			p.timer = time.AfterFunc(p.m.poll(), p.tick)
		} else {
			p.timer.Reset(p.m.poll())
		}
	}
}

// end notes that the write under way returned at now having written n
// bytes.
func (p *peer) end(now time.Time, n int) {
	p.mu.Lock()
	changed := p.m.done(now, n)
	p.mu.Unlock()
	if changed {
		p.changed()
	}
}

// tick runs on the stall timer while writes go on: it looks at the
// client's unread bytes and applies the stall rule.
func (p *peer) tick() {
	p.mu.Lock()
	if !p.m.writing {
		p.armed = false
		p.mu.Unlock()
		return
	}
	changed := p.m.observe(time.Now(), p.unread())
	p.timer.Reset(p.m.poll())
	p.mu.Unlock()
	if changed {
		p.changed()
	}
}

// unread returns the client's unread bytes, or -1 where they cannot be
// seen.
func (p *peer) unread() int {
	if p.kernel != nil {
		if n, err := p.kernel.unread(); err == nil {
			return n
		}
	}
	return -1
}

// stalled reports whether the client is stalled.
func (p *peer) stalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.stalled
}

// idle reports whether a write (or a hold) is under way and the client
// has taken none of the output for d. It looks at the client's unread
// bytes itself, as the stall timer does (see tick), so that it sees
// progress since the timer's last look.
func (p *peer) idle(d time.Duration) bool {
	p.mu.Lock()
	now := time.Now()
	changed := p.m.observe(now, p.unread())
	idle := p.m.writing && now.Sub(p.m.since) >= d
	p.mu.Unlock()
	if changed {
		p.changed()
	}
	return idle
}

// stop stops the stall timer.
func (p *peer) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.armed = false
}

// sizes returns how much raw output one chunk may carry and how much
// encoded output the writer may gather before it writes (0: write each
// line at once), for the rate the client takes bytes at.
func (p *peer) sizes() (chunk, batch int) {
	bps := p.rate.bps
	if bps == 0 {
		bps = firstRate
	}
	wire := bps * lineTime.Seconds()
	chunk = int(min(max(wire*3/4, minChunk), maxChunk)) // base64: 4 bytes on the wire for 3
	batch = int(min(wire, maxBatch))
	return chunk, batch
}

// A stallMeter applies the stall rule (see peer) to what it is told. It
// does no I/O and reads no clock.
type stallMeter struct {
	timeout time.Duration
	writing bool      // a write is under way
	since   time.Time // the last progress, or the start of the write under way
	unread  int       // the client's unread bytes at the last look; -1 unknown
	stalled bool
}

// poll is how often the meter wants to look while a write is under way.
func (m *stallMeter) poll() time.Duration { return m.timeout / 4 }

// start notes a write starting at now, with unread bytes not yet read by
// the client (-1 if unknown). Whatever came before was progress (the last
// write returned) or had nothing to wait for.
func (m *stallMeter) start(now time.Time, unread int) {
	m.writing, m.since, m.unread = true, now, unread
}

// done notes that the write under way returned at now with n bytes
// written, and reports whether stalled changed.
func (m *stallMeter) done(now time.Time, n int) (changed bool) {
	m.writing = false
	if n == 0 {
		return false
	}
	m.since = now
	return m.set(false)
}

// observe notes that the client had unread bytes at now (-1 if unknown)
// and reports whether stalled changed. The first count seen during a
// write that started without one is where changes count from.
func (m *stallMeter) observe(now time.Time, unread int) (changed bool) {
	if !m.writing {
		return false
	}
	if m.unread < 0 {
		m.unread = unread
	} else if unread >= 0 && unread != m.unread {
		m.since, m.unread = now, unread
		return m.set(false)
	}
	if now.Sub(m.since) >= m.timeout {
		return m.set(true)
	}
	return false
}

func (m *stallMeter) set(stalled bool) bool {
	changed := m.stalled != stalled
	m.stalled = stalled
	return changed
}

// A rateMeter takes a figure once the writes it counts have waited
// rateWindow in all, or carried rateBytes.
const (
	rateWindow = 50 * time.Millisecond
	rateBytes  = 256 << 10
)

// A rateMeter measures the rate at which the client takes bytes while the
// writer waits for it: the bytes written, less what the kernel's buffer
// gained meanwhile, over the time spent in writes. A write that does not
// wait costs a memory copy, so a client that keeps up shows a rate far
// above any size limit, and filling an empty pipe does not count as the
// client's reading.
type rateMeter struct {
	bytes int
	busy  time.Duration
	from  int     // the kernel buffer's unread bytes before the first write counted; -1 unknown
	bps   float64 // the last figure; 0 before the first
}

// add counts a write of n bytes that took d, with unread bytes in the
// kernel's buffer before it (-1 unknown).
func (r *rateMeter) add(n int, d time.Duration, unread int) {
	if r.bytes == 0 && r.busy == 0 {
		r.from = unread
	}
	r.bytes += n
	r.busy += d
}

// due reports whether a figure can be taken.
func (r *rateMeter) due() bool { return r.busy >= rateWindow || r.bytes >= rateBytes }

// figure takes a figure, given the unread bytes in the kernel's buffer
// now (-1 unknown), and starts counting again, unless the buffer gained
// more than a page over writes that waited less than rateWindow in all:
// the writer then wrote into room the buffer had, and what the client
// took meanwhile says nothing of its rate (on a busy machine it may not
// have run at all in a millisecond). The count then goes on until the
// writes have waited rateWindow, or the client has read the gain. figure
// reports whether it took a figure.
func (r *rateMeter) figure(unread int) bool {
	taken := r.bytes
	if r.from >= 0 && unread >= 0 {
		if unread > r.from+page && r.busy < rateWindow {
			return false
		}
		taken -= unread - r.from
	}
	r.bps = float64(max(taken, 1)) / max(r.busy.Seconds(), 1e-9)
	r.bytes, r.busy = 0, 0
	return true
}
