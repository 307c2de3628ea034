package main

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"shellagent/protocol/acptest"
)

// startAgentEnv is startAgent without --shell, with env added to the
// agent's environment.
func startAgentEnv(t *testing.T, env ...string) *agent {
	marker := "SHELLAGENT_TEST=" + rand.Text()
	c, cmd := acptest.StartBinary(t, binary, []string{"--containment", testMode}, append([]string{marker, noRaceExitDelay, ownState(t)}, env...))
	a := &agent{t: t, c: c, cmd: cmd, marker: marker, cwd: t.TempDir()}
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	return a
}

// SPEC, Prompts: CMD runs as $SHELL -c CMD (/bin/sh if $SHELL is unset)
// in the session's cwd.
func TestCommandsRunWithSHELLInTheSessionCwd(t *testing.T) {
	t.Parallel()
	wrapper := filepath.Join(t.TempDir(), "wrapped-sh")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nprintf 'wrapped %s ' \"$1\"\nexec /bin/sh \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := startAgentEnv(t, "SHELL="+wrapper)
	for _, name := range []string{"one", "two"} {
		dir := filepath.Join(a.cwd, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			SessionID string `json:"sessionId"`
		}
		a.c.MustCall("session/new", map[string]any{"cwd": dir}, &res)
		a.prompt(res.SessionID, "pwd -P")
		a.exitStatus(res.SessionID, "term_1")
		if got, want := string(a.c.Output(res.SessionID, "term_1")), "wrapped -c "+real+"\r\n"; got != want {
			t.Errorf("session in %s: output %q, want %q", name, got, want)
		}
	}

	// $SHELL empty is $SHELL unset: /bin/sh.
	b := startAgentEnv(t, "SHELL=")
	sid := b.session()
	b.prompt(sid, "echo $0")
	b.exitStatus(sid, "term_1")
	if got := string(b.c.Output(sid, "term_1")); got != "/bin/sh\r\n" {
		t.Errorf("without $SHELL: $0 is %q, want /bin/sh", got)
	}
}

// SPEC, Daemon mode: a daemon started on demand makes its socket
// directory (0700, owned by the user) and its socket (0600).
func TestDaemonMakesItsSocketPrivate(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	d.socket = filepath.Join(d.dir, "made", "d.sock") // a directory that does not exist yet
	r := d.relay()
	r.session(d.cwd)
	for _, tt := range []struct {
		path      string
		typ, perm os.FileMode
	}{
		{filepath.Dir(d.socket), os.ModeDir, 0o700},
		{d.socket, os.ModeSocket, 0o600},
	} {
		fi, err := os.Lstat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != tt.typ || fi.Mode().Perm() != tt.perm {
			t.Errorf("%s has mode %v, want %v", tt.path, fi.Mode(), tt.typ|tt.perm)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
			t.Errorf("%s is owned by uid %d, want %d", tt.path, st.Uid, os.Geteuid())
		}
	}
}
