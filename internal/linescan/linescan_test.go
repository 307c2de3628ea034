package linescan

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"shellagent/outputbuf"
	"shellagent/termtext"
)

func TestScanner(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", maxLine+10)
	tests := []struct {
		name    string
		ring    int      // capacity; 0: 1 MiB
		writes  []string // written in turn, one scan after each
		pattern string
		budget  int
		want    string // the line found by the scans, or by partial after them
		partial bool   // found by partial
	}{
		{name: "escape sequences removed", writes: []string{"\x1b[32mready\x1b[0m on :3000\r\n"}, pattern: "^ready on :3000$", want: "ready on :3000"},
		{name: "a line cut across writes", writes: []string{"rea", "dy\r", "\n"}, pattern: "^ready$", want: "ready"},
		{name: "carriage return redraws", writes: []string{"50%\r100% done\r\n"}, pattern: "^100%", want: "100% done"},
		{name: "the first matching line", writes: []string{"one ready\ntwo ready\n"}, pattern: "ready", want: "one ready"},
		{name: "no match", writes: []string{"a\nb\n"}, pattern: "c"},
		{name: "a match across lines is none", writes: []string{"ready\non\n"}, pattern: `ready\s+on`},
		{name: "a later line after a cross-line candidate", writes: []string{"ready\non\nready on\n"}, pattern: `ready\s+on`, want: "ready on"},
		{name: "a partial line", writes: []string{"Password: "}, pattern: "^Password: $", want: "Password: ", partial: true},
		{name: "a partial line that does not match", writes: []string{"Pass"}, pattern: "Password"},
		{name: "a long line is matched on its start", writes: []string{long + "END\n"}, pattern: "END"},
		{name: "a long line's start", writes: []string{long + "END\n"}, pattern: "^a+$", want: long[:maxLine]},
		{name: "a line cut by the ring is dropped", ring: 16, writes: []string{"0123456789ready\nok\n"}, pattern: "ready|ok", want: "ok"},
		{name: "old output beyond the budget is skipped", writes: []string{"ready\n" + strings.Repeat("x\n", 100)}, budget: 100, pattern: "ready|x", want: "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ring := outputbuf.New(cmpOr(tt.ring, 1<<20))
			sc := New(regexp.MustCompile("(?m)"+tt.pattern), 0)
			var got string
			var found, byPartial bool
			for _, w := range tt.writes {
				ring.Write([]byte(w))
				if got, found = sc.Scan(ring, tt.budget); found {
					break
				}
			}
			if !found {
				got, found = sc.Partial()
				byPartial = found
				if _, again := sc.Partial(); again {
					t.Errorf("Partial matched the same line twice")
				}
			}
			if !found {
				got = ""
			}
			if got != tt.want || byPartial != tt.partial {
				t.Errorf("found %.40q (partial %v), want %.40q (partial %v)", got, byPartial, tt.want, tt.partial)
			}
		})
	}
}

// --new: the scan starts where the ring was when the wait started.
func TestScannerFrom(t *testing.T) {
	t.Parallel()
	ring := outputbuf.New(1 << 10)
	ring.Write([]byte("ready\nrea"))
	sc := New(regexp.MustCompile("(?m)^ready"), ring.Total())
	if line, ok := sc.Scan(ring, 0); ok {
		t.Fatalf("matched %q, printed before", line)
	}
	ring.Write([]byte("dy again\nready now\n"))
	if line, ok := sc.Scan(ring, 0); !ok || line != "ready now" {
		t.Errorf("found %q, %v; want the line begun and ended after the start", line, ok)
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// BenchmarkScanner measures a wait's scan of a dev server's log, in
// bytes of output per second, against termtext.Plain alone over the same
// bytes in the same run: the scan's cost beyond making the text plain is
// the one pass of the regular expression.
func BenchmarkScanner(b *testing.B) {
	var log bytes.Buffer
	for i := 0; log.Len() < 1<<20; i++ {
		fmt.Fprintf(&log, "\x1b[2m12:00:%02d\x1b[0m GET /api/items/%d 200 in %dms\r\n", i%60, i, i%300)
	}
	out := log.Bytes()
	b.Run("scan", func(b *testing.B) {
		re := regexp.MustCompile(`(?m)ready on http://\S+`)
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			ring := outputbuf.New(len(out))
			ring.Write(out)
			if _, ok := New(re, 0).Scan(ring, 0); ok {
				b.Fatal("matched")
			}
		}
	})
	b.Run("plain-baseline", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			ring := outputbuf.New(len(out))
			ring.Write(out)
			data, _ := ring.Snapshot()
			_ = termtext.Plain(data)
		}
	})
}
