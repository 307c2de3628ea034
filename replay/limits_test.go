package replay

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// zeros reads n zero bytes, as /dev/zero does, but ends.
type zeros struct{ n int }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), z.n)
	clear(p[:k])
	z.n -= k
	return k, nil
}

// peakHeap runs f and returns the most heap in use it was seen to take,
// sampled every 10 ms. The test must not be parallel.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var (
		peak uint64
		wg   sync.WaitGroup
	)
	done := make(chan struct{})
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	return peak - min(peak, base)
}

// A transcript that is one endless line (shellagent replay /dev/zero) or
// one of 100 MB is refused once it is over the cap on a line, in bounded
// memory (here a cap of 1 MiB; TestReplayMemoryIsBounded runs the binary
// at MaxLine). Issue 22: "shellagent replay /dev/zero" reached 1 GB in 6
// s, and one 100 MB line peaked at 753 MB. Not parallel: it measures the
// heap.
func TestReadRefusesALongLine(t *testing.T) {
	for _, in := range []struct {
		name string
		r    io.Reader
	}{
		{"zeros", &zeros{n: 200 << 20}},
		{"a 100 MB line", io.MultiReader(strings.NewReader(`{"client":"`), &repeat{b: 'x', n: 100 << 20}, strings.NewReader("\"}\n"))},
	} {
		var err error
		peak := peakHeap(func() { _, err = read(in.r, limits{line: 1 << 20, size: MaxSize, lines: MaxLines}) })
		if want := "1: a line longer than 1048576 bytes"; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: err %v, want %s…", in.name, err, want)
		}
		if limit := uint64(16 << 20); peak > limit {
			t.Errorf("%s: the heap grew by %d MiB, want at most %d", in.name, peak>>20, limit>>20)
		}
	}
}

// repeat reads n copies of b.
type repeat struct {
	b byte
	n int
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], bytes.Repeat([]byte{r.b}, min(len(p), r.n, 64<<10)))
	r.n -= k
	return k, nil
}

// A transcript over its size or its count of lines is refused (within
// lower limits than Read's, which the test above checks for the line).
func TestReadRefusesABigTranscript(t *testing.T) {
	t.Parallel()
	lim := limits{line: 100, size: 1000, lines: 10}
	spaces := strings.Repeat(strings.Repeat(" ", 99)+"\n", 10) + "{}\n"
	if _, err := read(strings.NewReader(spaces), limits{line: 100, size: 1000, lines: 100}); err == nil || err.Error() != "11: more than 1000 bytes: a transcript holds at most 1000" {
		t.Errorf("%d bytes: err %v", len(spaces), err)
	}
	lines := strings.Repeat("\n", 10) + `{"agent":1}`
	if _, err := read(strings.NewReader(lines), lim); err == nil || err.Error() != "11: more than 10 lines: a transcript holds at most 10" {
		t.Errorf("11 lines: err %v", err)
	}
	long := strings.Repeat(" ", 101) + "\n"
	if _, err := read(strings.NewReader(long), lim); err == nil || err.Error() != "1: a line longer than 100 bytes, twice what the agent accepts" {
		t.Errorf("a line of 101 bytes: err %v", err)
	}
	if tr, err := read(strings.NewReader(strings.Repeat(" ", 89)+`{"agent":1}`+"\n"), lim); err != nil || len(tr.Lines) != 1 {
		t.Errorf("a line of 100 bytes: %v", err)
	}
}

// bigInitialize is an initialize request whose params hold n numbers
// besides protocolVersion v ("" for none).
func bigInitialize(id string, n int, v string) string {
	params := `"x":[` + strings.Repeat("0,", n) + `0]`
	if v != "" {
		params = `"protocolVersion":` + v + "," + params
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{` + params + `}}`
}

// A client message of many values (one the agent accepts) is compared in
// bounded memory: an array or object past maxValues is compared as its
// text. Before, a 14 MB message of small numbers took a gigabyte (at
// maxValues 1,024, this one took 20 MiB). Not parallel: it measures the
// heap, and lowers maxValues.
func TestPlayBoundsABigMessage(t *testing.T) {
	old := maxValues
	maxValues = 1024
	defer func() { maxValues = old }()
	const n = 64 << 10 // 64 times maxValues
	script := `{"client":` + bigInitialize("1", n, "2") + "}\n" +
		`{"agent":{"jsonrpc":"2.0","id":1,"result":{}}}` + "\n"
	tr, err := Read(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, sent, departs string
	}{
		{"the same, spaced and under another id", strings.ReplaceAll(bigInitialize(`"a"`, n, "2"), ",", ", "), ""},
		{"another number", strings.Replace(bigInitialize("1", n, "2"), "0]", "1]", 1), "line 1: a initialize request differs: params.x: want [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0…, got [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0… (compared as text: over 1024 JSON values)"},
	} {
		var (
			deps []Departure
			out  bytes.Buffer
		)
		peak := peakHeap(func() {
			deps, err = Play(context.Background(), tr, strings.NewReader(tt.sent+"\n"), &out, Options{})
		})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range deps {
			got = append(got, d.String())
		}
		if strings.Join(got, "\n") != tt.departs {
			t.Errorf("%s: departures %q, want %q", tt.name, got, tt.departs)
		}
		if want := `,"result":{}}`; !strings.HasSuffix(strings.TrimSpace(out.String()), want) {
			t.Errorf("%s: answered %s", tt.name, out.String())
		}
		if limit := uint64(10 << 20); peak > limit {
			t.Errorf("%s: the heap grew by %d MiB, want at most %d", tt.name, peak>>20, limit>>20)
		}
	}
}

// A message with more members than twice maxValues is held as its text,
// and still classified by its method and id. Not parallel: it lowers
// maxValues.
func TestClassifyABigMessage(t *testing.T) {
	old := maxValues
	maxValues = 4
	defer func() { maxValues = old }()
	text := `{"jsonrpc":"2.0","a":[1,2,3,4,5],"b":1,"c":2,"d":3,"e":4,"f":5,"g":6,"id":7,"method":"session/new","h":{"i":1}}`
	m := classify([]byte(text))
	if m.v.kind != opaque || m.kind != request || m.method != "session/new" || string(m.id.append(nil)) != "7" {
		t.Errorf("classified as kind %v, method %q, id %s, value of kind %c", m.kind, m.method, m.id, m.v.kind)
	}
	if got := string(m.v.append(nil)); got != text {
		t.Errorf("written back as %s", got)
	}
	v, err := parseValue([]byte(`{"a":[1,2,3,4,5],"b":{"c":[1]}}`))
	if err != nil || v.kind != '{' || v.members[0].val.kind != opaque || v.members[1].val.kind != opaque {
		t.Errorf("parsed as %+v, %v", v, err)
	}
	if _, err := parseValue([]byte(`{"a":[1,2,3,4,5,}`)); err == nil {
		t.Error("bad JSON in an opaque value parsed")
	}
}

// Responses go out with the client's id as it was written: -0 as -0
// (issue 22 saw -0 come back as 0), 1.0 as 1.0.
func TestPlayEchoesIDsAsSent(t *testing.T) {
	t.Parallel()
	tr, err := Read(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"-0", "1.0", "1e2", `"x"`} {
		sent := strings.Replace(follow[0], `"id":101`, `"id":`+id, 1)
		var out bytes.Buffer
		if _, err := Play(context.Background(), tr, strings.NewReader(sent+"\n"), &out, Options{}); err != nil {
			t.Fatal(err)
		}
		if want := `{"id":` + id + `,"result"`; !strings.HasPrefix(out.String(), want) {
			t.Errorf("id %s answered with %.60s, want %s…", id, out.String(), want)
		}
	}
}
