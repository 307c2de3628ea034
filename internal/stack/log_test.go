package stack

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProject(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"/home/ann/shop", "/home/bob/shop", "/", "/srv/..", "/tmp/a b/../../etc", "/x/..hidden", "/y/" + strings.Repeat("long", 30)} {
		p, err := Project(dir)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(p, "/\\ ") || strings.HasPrefix(p, ".") || len(p) > 60 || p == "" {
			t.Errorf("Project(%q) = %q: not one safe path element", dir, p)
		}
		if filepath.Clean(filepath.Join("/state/logs", p)) != "/state/logs/"+p {
			t.Errorf("Project(%q) = %q leaves STATE/logs", dir, p)
		}
	}
	a, _ := Project("/home/ann/shop")
	b, _ := Project("/home/bob/shop")
	a2, _ := Project("/home/ann/./shop/")
	if a == b || !strings.HasPrefix(a, "shop-") || a != a2 {
		t.Errorf("Project: ann's %q, bob's %q, ann's again %q; want shop-HASH, two apart, the same path the same", a, b, a2)
	}
	if _, err := LogPath("/state", "/p", "../x"); err == nil {
		t.Error("LogPath accepted the service name ../x")
	}
	if p, err := LogPath("/state", "/home/ann/shop", "api"); err != nil || p != "/state/logs/"+a+"/api.log" {
		t.Errorf("LogPath = %q, %v; want /state/logs/%s/api.log", p, err, a)
	}
}

// TestLogCapUnderFlood: a flood of lines many times the cap leaves at
// most two files of at most the cap each, holding the newest output in
// order.
func TestLogCapUnderFlood(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	path := filepath.Join(t.TempDir(), "logs", "proj", "yes.log")
	l, err := openLog(path, limit)
	if err != nil {
		t.Fatal(err)
	}
	var last []byte
	for i := range 8000 { // about 13 times the cap, in chunks of varied size
		chunk := []byte(fmt.Sprintf("line %06d %s\n", i, strings.Repeat("y", i%200)))
		if n, err := l.Write(chunk); err != nil || n != len(chunk) {
			t.Fatalf("Write %d: %d, %v", i, n, err)
		}
		last = chunk
	}
	huge := bytes.Repeat([]byte("z"), 3*limit+17) // one write larger than the cap
	if n, err := l.Write(huge); err != nil || n != len(huge) {
		t.Fatalf("Write of %d bytes: %d, %v", len(huge), n, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		fi, _ := e.Info()
		total += fi.Size()
		if fi.Size() > limit {
			t.Errorf("%s holds %d bytes, over the cap %d", e.Name(), fi.Size(), limit)
		}
		if e.Name() != "yes.log" && e.Name() != "yes.log.1" {
			t.Errorf("unexpected file %s", e.Name())
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %v, want 0600", e.Name(), mode)
		}
	}
	if total > 2*limit {
		t.Errorf("%d bytes on disk, over twice the cap %d", total, 2*limit)
	}
	cur, _ := os.ReadFile(path)
	if int64(len(cur)) != int64(len(huge))%limit || len(strings.Trim(string(cur), "z")) != 0 {
		t.Errorf("yes.log holds %d bytes, want the last %d of the huge write", len(cur), len(huge)%limit)
	}

	// A new run appends to what the last one left, still capped.
	l, err = openLog(path, limit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write(last); err != nil {
		t.Fatal(err)
	}
	l.Close()
	cur2, _ := os.ReadFile(path)
	if !bytes.Equal(cur2, append(cur, last...)) {
		t.Errorf("after reopening, yes.log holds %d bytes, want the %d before and the new line", len(cur2), len(cur))
	}
	if _, err := l.Write([]byte("x")); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// TestLogRotatesWhole: lines that fit are never split by a rotation; the
// older file ends where the newer one begins.
func TestLogRotatesWhole(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.log")
	l, err := openLog(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 25 {
		fmt.Fprintf(l, "line %02d\n", i) // 8 bytes: 12 to a file
	}
	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	want := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "line %02d\n", i)
		}
		return b.String()
	}
	if string(old) != want(12, 24) || string(cur) != want(24, 25) {
		t.Errorf("a.log.1 = %q\na.log = %q\nwant lines 12-23, then 24", old, cur)
	}
}
