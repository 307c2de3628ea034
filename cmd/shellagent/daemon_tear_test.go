package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A relay's client that stops reading in the middle of a line while three
// commands flood, and reads again only a little after the daemon closes
// its connection, gets whole lines only: the daemon finishes the line
// under way and writes no other, whether it closes the connection for
// daemon stop or because the relay's input ended.
func TestDaemonStalledRelayClientGetsWholeLines(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for seconds")
	}
	t.Parallel()
	for _, end := range []string{"daemon stop", "relay stdin closed"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			d := newDaemonFixture(t)
			cmd := exec.Command(binary, d.relayArgs()...)
			cmd.Env, cmd.Stderr = d.env(), testWriter{t}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stdin, stdout := startOwnStdout(t, cmd)
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			t.Cleanup(func() { cmd.Process.Kill(); <-exited; stdout.Close() })

			var got bytes.Buffer // every byte read from the relay's stdout, in order
			r := bufio.NewReader(io.TeeReader(stdout, &got))
			call := func(id int, method string, params any) {
				t.Helper()
				line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := stdin.Write(append(line, '\n')); err != nil {
					t.Fatal(err)
				}
			}
			await := func(id int) []byte {
				t.Helper()
				want := fmt.Sprintf(`"id":%d,`, id)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						t.Fatalf("awaiting the answer %d: %v (read %q)", id, err, line)
					}
					if bytes.Contains(line, []byte(want)) {
						return line
					}
				}
			}
			call(1, "initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "t", "version": "1"}})
			await(1)
			call(2, "session/new", map[string]any{"cwd": d.cwd})
			var res struct {
				Result struct {
					SessionID string `json:"sessionId"`
				} `json:"result"`
			}
			if err := json.Unmarshal(await(2), &res); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				call(3+i, "session/prompt", map[string]any{"sessionId": res.Result.SessionID, "prompt": []map[string]string{{"type": "text", "text": "/bg cat /dev/zero"}}})
			}
			for chunks := 0; chunks < 20; {
				line, err := r.ReadBytes('\n')
				if err != nil {
					t.Fatalf("reading the floods: %v", err)
				}
				if bytes.Contains(line, []byte(`"terminal_output_chunk"`)) {
					chunks++
				}
			}
			if _, err := r.ReadBytes('"'); err != nil { // into the next line
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // the pipe fills, the daemon's writer waits in a line

			// The daemon closes the connection: it sends what is queued for
			// 200 ms, then only the rest of the line under way, for 1 s more.
			// The client reads again 500 ms after that close began.
			stopped := make(chan time.Duration, 1)
			switch end {
			case "daemon stop":
				go func() {
					start := time.Now()
					_, stderr, code := d.run(binary, "daemon", "stop", "--socket", d.socket)
					if code != 0 {
						t.Errorf("daemon stop: exit %d, %s", code, stderr)
					}
					stopped <- time.Since(start)
				}()
				// The connection closes once the sessions have: after the
				// floods are gone.
				d.waitGone(10*time.Second, "daemon stop", d.work)
			case "relay stdin closed":
				stdin.Close()
				d.waitLog("disconnected; its sessions are detached")
			}
			time.Sleep(500 * time.Millisecond)
			if _, err := io.Copy(io.Discard, r); err != nil {
				t.Fatal(err)
			}
			if end == "daemon stop" {
				// Its sessions' kill grace (500ms) and the close's bound,
				// as the daemon logs them: the command's own start and the
				// process's exit after its log (a binary under -race on a
				// loaded machine, the history's fsync) are not the stop's.
				<-stopped
				if took := d.logGap("stop requested", "daemon exiting"); took > 5*time.Second {
					t.Errorf("the daemon took %v from the stop request to its exit", took)
				}
			}
			out := got.Bytes()
			if len(out) == 0 || out[len(out)-1] != '\n' {
				t.Errorf("the relay's stdout ends in the middle of a line: …%q", out[max(0, len(out)-80):])
			}
			lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
			for i, line := range lines {
				if !json.Valid(line) {
					t.Errorf("line %d of %d is not JSON: %q…%q", i+1, len(lines), line[:min(len(line), 80)], line[max(0, len(line)-80):])
				}
			}
			t.Logf("%d lines, %d bytes", len(lines), len(out))
		})
	}
}
