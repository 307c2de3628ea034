package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCheckDir: a socket directory is refused, saying why, unless it is a
// directory of this user's that group and others cannot reach.
func TestCheckDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return dir
	}
	private := mk("private", 0o700)
	link := filepath.Join(base, "link")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other := mk("other", 0o700)
	chowned := os.Geteuid() == 0 && os.Chown(other, 65534, 65534) == nil
	tests := []struct {
		dir  string
		want string // in the error; "" for none
	}{
		{private, ""},
		{mk("open", 0o755), "mode 0755"},
		{mk("group", 0o750), "mode 0750"},
		{mk("sticky", 0o1777), "must be 0700"},
		{link, "is a symlink"},
		{file, "is not a directory"},
		{filepath.Join(base, "missing"), "no such file"},
	}
	if chowned {
		tests = append(tests, struct{ dir, want string }{other, "owned by uid 65534"})
	}
	for _, tt := range tests {
		err := CheckDir(tt.dir)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.dir, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one that says %q", tt.dir, err, tt.want)
		}
	}
}

// TestSocketPath: the flag, else $SHELLAGENT_SOCKET, else
// $XDG_RUNTIME_DIR/shellagent/daemon.sock, else /tmp/shellagent-UID; a
// path too long for sun_path is an error that says so.
func TestSocketPath(t *testing.T) {
	uid := strconv.Itoa(os.Geteuid())
	long := "/" + strings.Repeat("d", 120) + "/daemon.sock"
	tests := []struct {
		flag, env, xdg string
		want, err      string
	}{
		{flag: "/a/flag.sock", env: "/a/env.sock", xdg: "/run/user/1", want: "/a/flag.sock"},
		{env: "/a/env.sock", xdg: "/run/user/1", want: "/a/env.sock"},
		{xdg: "/run/user/1", want: "/run/user/1/shellagent/daemon.sock"},
		{want: filepath.Join(os.TempDir(), "shellagent-"+uid, "daemon.sock")},
		{flag: long, err: "at most 107"},
		{xdg: long, err: "from $XDG_RUNTIME_DIR"},
	}
	for _, tt := range tests {
		t.Setenv(SocketEnv, tt.env)
		t.Setenv("XDG_RUNTIME_DIR", tt.xdg)
		got, err := SocketPath(tt.flag)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%+v: error %v, want one that says %q", tt, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%+v: %q, %v; want %q", tt, got, err, tt.want)
		}
	}
}
