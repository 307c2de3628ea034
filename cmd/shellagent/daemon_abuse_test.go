package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDaemonSurvivesAbusiveConnections: no peer can crash the daemon. With
// a counter running in a session, 30 connections each reset the daemon,
// close before their hello, send garbage, send 70 KB without a newline,
// and half-close; the daemon lives on (the same process), the counter
// keeps ticking for the relay that started it, and a new relay resumes
// the session and sees its live output.
//
// Issue 22 (High), which this test reproduced: a connection that closes
// before its hello crashed the daemon, and every session died with it:
//
//	shellagent daemon --socket $S & sleep .3
//	python3 -c 'import socket,time,sys;s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);time.sleep(.2)' $S
//
// → the daemon exited 2 with "panic: runtime error: slice bounds out of
// range [:-1]" at daemon/hello.go:121: on a reset, ReadMsgUnix returned
// n = -1, the buffer was sliced before the error was checked, and the
// connection's goroutine had no recover.
func TestDaemonSurvivesAbusiveConnections(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	a := d.relay()
	sid, seen := a.startCounter(d.cwd)
	daemons := d.daemons()
	if len(daemons) != 1 {
		t.Fatalf("daemons: %v, want one", daemons)
	}

	abuses := []struct {
		name string
		do   func(nc *net.UnixConn) error
	}{
		{"reset: close with the daemon's hello unread (the issue's repro)", func(nc *net.UnixConn) error {
			// A unix socket has no SO_LINGER: a close with unread data
			// is what resets it.
			return peekReadable(nc) // closed below, unread
		}},
		{"close before the hello", func(*net.UnixConn) error { return nil }},
		{"garbage", func(nc *net.UnixConn) error {
			if _, err := nc.Write([]byte("\x00\xff{{{\"shellagent\":\n GET / HTTP/1.1\r\n\r\n")); err != nil {
				return err
			}
			return readToEnd(nc)
		}},
		{"70 KB without a newline", func(nc *net.UnixConn) error {
			_, err := nc.Write(bytes.Repeat([]byte("x"), 70<<10))
			if err != nil && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
				return err // the daemon refuses it after 4 KiB and closes
			}
			return readToEnd(nc)
		}},
		{"half-close", func(nc *net.UnixConn) error {
			if err := nc.CloseWrite(); err != nil {
				return err
			}
			return readToEnd(nc)
		}},
	}
	for _, abuse := range abuses {
		for i := range 30 {
			nc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: d.socket, Net: "unix"})
			if err != nil {
				t.Fatalf("%s, connection %d: %v (the daemon is gone?)", abuse.name, i+1, err)
			}
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			err = abuse.do(nc)
			nc.Close()
			if err != nil {
				t.Fatalf("%s, connection %d: %v", abuse.name, i+1, err)
			}
		}
		if now := d.daemons(); !slices.Equal(now, daemons) {
			t.Fatalf("after 30 connections of %s the daemons are %v, were %v", abuse.name, now, daemons)
		}
	}

	a.waitLines(sid, "term_1", seen+5) // it ticks on for the relay that started it
	b := d.relay()
	b.resumeCounter(sid, d.cwd, seen, "the first relay, before the abuse,")
	if now := d.daemons(); !slices.Equal(now, daemons) {
		t.Errorf("at the end the daemons are %v, were %v", now, daemons)
	}
	b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	d.waitGone(2*time.Second, "session/close", d.work)
}

// peekReadable waits until the daemon's hello has arrived on nc, without
// reading it: a close then resets the connection.
func peekReadable(nc *net.UnixConn) error {
	rc, err := nc.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		var n int
		n, _, perr = unix.Recvfrom(int(fd), make([]byte, 1), unix.MSG_PEEK|unix.MSG_DONTWAIT)
		if perr == unix.EAGAIN {
			return false
		}
		if perr == nil && n == 0 {
			perr = io.ErrUnexpectedEOF // closed before its hello
		}
		return true
	})
	if err != nil {
		return err
	}
	return perr
}

// readToEnd reads what the daemon sends (its hello) until it closes.
func readToEnd(nc *net.UnixConn) error {
	_, err := io.Copy(io.Discard, nc)
	if errors.Is(err, unix.ECONNRESET) {
		return nil // it closed with our bytes unread
	}
	return err
}
