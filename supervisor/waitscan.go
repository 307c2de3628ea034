package supervisor

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"shellagent/outputbuf"
	"shellagent/termtext"
)

// How a wait reads a terminal's output. The PTY's reader only writes the
// ring, as for any terminal; the wait's goroutine reads what is new every
// scanEvery, so that a terminal that prints in many small writes costs
// one read of the ring per scanEvery, not one per write. A scan reads at
// most scanBudget bytes (except the first, which reads all the ring held
// when the wait started): a terminal that prints more than that in
// scanEvery has the older part skipped, like output the ring overwrote
// before the wait read it. Lines are matched in batches: one pass of
// termtext.Plain and one of the regular expression over many lines.
const (
	scanEvery    = 50 * time.Millisecond
	scanBudget   = 256 << 10
	partialQuiet = 250 * time.Millisecond // a partial last line counts once the terminal has printed nothing for this long
	maxLine      = 64 << 10               // a line is matched on its first 64 KiB
	maxBatch     = 64 << 10               // complete lines matched at once
	readChunk    = 32 << 10
)

// lineScanner finds the first line of a terminal's output that matches a
// pattern, escape sequences removed, reading the ring from an offset on.
// It is owned by one wait's goroutine.
type lineScanner struct {
	re    *regexp.Regexp
	off   int64  // the next offset of the ring to read
	line  []byte // the line being read: its bytes since the last newline, at most maxLine
	frag  bool   // the line being read lost its start (skipped or overwritten): it is dropped
	tried int    // len(line) when partial last tried it, or -1
	batch []byte // complete lines, each with its newline, not yet matched
	buf   []byte
}

func newLineScanner(re *regexp.Regexp, from int64) *lineScanner {
	return &lineScanner{re: re, off: from, tried: -1, buf: make([]byte, readChunk)}
}

// scan reads what ring holds beyond the last scan, at most budget bytes
// of it (0: no limit), and returns the first complete line that matches.
func (sc *lineScanner) scan(ring *outputbuf.Ring, budget int) (string, bool) {
	total := ring.Total()
	if budget > 0 && total-sc.off > int64(budget) {
		sc.skipTo(total - int64(budget))
	}
	for sc.off < total {
		n, start := ring.ReadAt(sc.buf, sc.off)
		if start > sc.off {
			sc.skipTo(start) // overwritten before it was read
		}
		if n == 0 {
			break
		}
		sc.off = start + int64(n)
		sc.add(sc.buf[:n])
		if len(sc.batch) >= maxBatch {
			if line, ok := sc.match(); ok {
				return line, true
			}
		}
	}
	return sc.match()
}

// skipTo goes on reading at off, beyond bytes that will never be read:
// the line they cut is dropped.
func (sc *lineScanner) skipTo(off int64) {
	sc.off, sc.line, sc.frag, sc.tried = off, sc.line[:0], true, -1
}

// add takes bytes of output: each line they complete joins the batch.
func (sc *lineScanner) add(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			sc.extend(p)
			return
		}
		sc.extend(p[:i])
		if !sc.frag {
			sc.batch = append(append(sc.batch, sc.line...), '\n')
		}
		sc.line, sc.frag, sc.tried = sc.line[:0], false, -1
		p = p[i+1:]
	}
}

func (sc *lineScanner) extend(p []byte) {
	if room := maxLine - len(sc.line); len(p) > room {
		p = p[:room]
	}
	sc.line = append(sc.line, p...)
}

// match matches the batch and empties it.
func (sc *lineScanner) match() (string, bool) {
	if len(sc.batch) == 0 {
		return "", false
	}
	text := termtext.Plain(sc.batch)
	sc.batch = sc.batch[:0]
	return findLine(sc.re, text)
}

// partial matches the line being read, which has no newline yet, unless
// it was tried as it is already.
func (sc *lineScanner) partial() (string, bool) {
	if len(sc.line) == 0 || sc.frag || len(sc.line) == sc.tried {
		return "", false
	}
	sc.tried = len(sc.line)
	text := termtext.Plain(sc.line)
	return text, sc.re.MatchString(text)
}

// findLine returns the first line of text that re matches. re is compiled
// with (?m), so that ^ and $ match at each line's ends and one pass over
// many lines finds a candidate; a match that spans lines does not count,
// so the line a candidate starts on is matched alone, and the search goes
// on after it if that fails.
func findLine(re *regexp.Regexp, text string) (string, bool) {
	for text != "" {
		loc := re.FindStringIndex(text)
		if loc == nil {
			return "", false
		}
		start := strings.LastIndexByte(text[:loc[0]], '\n') + 1
		end := len(text)
		if i := strings.IndexByte(text[start:], '\n'); i >= 0 {
			end = start + i
		}
		if line := text[start:end]; re.MatchString(line) {
			return line, true
		}
		if end == len(text) {
			return "", false
		}
		text = text[end+1:]
	}
	return "", false
}

// probePort reports whether port accepts a TCP connection on 127.0.0.1
// or ::1, naming the address that did.
func (w *waiter) probePort(ctx context.Context) (string, error) {
	var last error
	for _, host := range []string{"127.0.0.1", "::1"} {
		d := net.Dialer{Timeout: probeTimeout}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(w.spec.port)))
		if err == nil {
			c.Close() // Best effort: it was only a probe.
			return fmt.Sprintf("Port %d accepts connections (on %s)", w.spec.port, host), nil
		}
		last = err
	}
	return "", last
}

// urlProbe returns a probe of u: any HTTP response counts, redirects are
// not followed, no proxy is used, and a certificate is not verified (a
// dev server's is typically self-signed, and nothing is sent but a GET).
func urlProbe(u string) func(context.Context) (string, error) {
	client := &http.Client{
		Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       answerTimeout,
	}
	return func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close() // Best effort: only the status counts.
		return fmt.Sprintf("%s answered %s", u, resp.Status), nil
	}
}
