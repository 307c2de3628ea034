package protocol

import (
	"testing"
	"time"
)

// The stall rule on a clock of its own: each step happens at its offset
// from the start of a write.
func TestStallMeter(t *testing.T) {
	const timeout = time.Second
	type step struct {
		at     time.Duration
		do     string // "observe", or "done" (a write returned)
		unread int    // observe: the client's unread bytes, -1 unknown
		n      int    // done: bytes written
		want   bool   // stalled after the step
	}
	tests := []struct {
		name   string
		unread int // at the start of the write
		steps  []step
	}{
		{"a write that accepts nothing for the timeout", -1, []step{
			{at: 250 * time.Millisecond, do: "observe", unread: -1},
			{at: 999 * time.Millisecond, do: "observe", unread: -1},
			{at: time.Second, do: "observe", unread: -1, want: true},
			{at: 3 * time.Second, do: "done", n: 1},
		}},
		{"a client that takes a byte every 0.9 s", 65536, []step{
			{at: 900 * time.Millisecond, do: "observe", unread: 65535},
			{at: 1800 * time.Millisecond, do: "observe", unread: 65534},
			{at: 2700 * time.Millisecond, do: "observe", unread: 65533},
			{at: 3599 * time.Millisecond, do: "observe", unread: 65533},
			{at: 3600 * time.Millisecond, do: "observe", unread: 65532},
		}},
		{"a client that reads, then takes nothing", 65536, []step{
			{at: 500 * time.Millisecond, do: "observe", unread: 4096},
			{at: 1400 * time.Millisecond, do: "observe", unread: 4096},
			{at: 1500 * time.Millisecond, do: "observe", unread: 4096, want: true},
			{at: 1600 * time.Millisecond, do: "observe", unread: 0},
		}},
		{"a write that started without a look", -1, []step{
			{at: 250 * time.Millisecond, do: "observe", unread: 65536}, // where changes count from
			{at: 999 * time.Millisecond, do: "observe", unread: 65536},
			{at: time.Second, do: "observe", unread: 65536, want: true},
			{at: 1100 * time.Millisecond, do: "observe", unread: 60000},
		}},
		{"a write accepted bit by bit", 0, []step{
			{at: 800 * time.Millisecond, do: "observe", unread: 4096},
			{at: 1600 * time.Millisecond, do: "observe", unread: 8192},
			{at: 2400 * time.Millisecond, do: "done", n: 12288},
			{at: 5000 * time.Millisecond, do: "observe", unread: 8192}, // no write under way
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Now()
			m := stallMeter{timeout: timeout}
			m.start(t0, tt.unread)
			for _, s := range tt.steps {
				was := m.stalled
				var changed bool
				if s.do == "done" {
					changed = m.done(t0.Add(s.at), s.n)
				} else {
					changed = m.observe(t0.Add(s.at), s.unread)
				}
				if m.stalled != s.want || changed != (was != s.want) {
					t.Fatalf("%s at %v: stalled %v (changed %v), want %v", s.do, s.at, m.stalled, changed, s.want)
				}
			}
		})
	}
}

func TestSizesFollowTheClientsRate(t *testing.T) {
	tests := []struct {
		name         string
		n            int
		took         time.Duration
		chunk, batch int
	}{
		{"no figure yet", 0, 0, minChunk, 5000},
		{"a client that keeps up", 64 << 10, 20 * time.Microsecond, maxChunk, maxBatch},
		{"a client at 1 MB/s", 1000, time.Millisecond, 37500, 50000},
		{"a client at 100 KB/s", 100, time.Millisecond, minChunk, 5000},
		{"a client at 1 KB/s", 1, time.Millisecond, minChunk, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &peer{}
			for range 100 {
				p.rate.add(tt.n, tt.took, -1)
				if p.rate.due() {
					p.rate.figure(-1)
				}
			}
			if chunk, batch := p.sizes(); chunk != tt.chunk || batch != tt.batch {
				t.Errorf("sizes %d, %d; want %d, %d", chunk, batch, tt.chunk, tt.batch)
			}
		})
	}
}

// Filling an empty pipe is not the client's reading: a window that wrote
// 72 KiB in 80 ms while the pipe gained 64 KiB saw the client take 8 KiB.
// A window whose writes hardly waited while the pipe gained says nothing
// of the client: it takes no figure, and counts on until the client has
// read the gain, or the writes have waited rateWindow.
func TestRateMeterCountsWhatTheClientTook(t *testing.T) {
	var r rateMeter
	r.add(64<<10, 10*time.Microsecond, 0)
	r.add(4<<10, 40*time.Millisecond, 64<<10)
	r.add(4<<10, 40*time.Millisecond, 64<<10)
	if !r.due() {
		t.Fatal("no figure after 80 ms of waiting")
	}
	if !r.figure(64 << 10) {
		t.Fatal("figure took none after 80 ms of waiting")
	}
	if want := float64(8<<10) / 0.08001; r.bps < want*0.99 || r.bps > want*1.01 {
		t.Errorf("%.0f B/s, want %.0f", r.bps, want)
	}

	for _, tc := range []struct {
		name  string
		then  time.Duration // a last write's wait
		after int           // the unread bytes after it
		bps   float64       // 0: no figure yet
	}{
		{"the client caught up", 10 * time.Microsecond, 1 << 10, float64(768<<10-(1<<10)) / 20e-6},
		{"the writes waited", rateWindow, 256 << 10, float64(768<<10-(256<<10)) / (rateWindow + 10*time.Microsecond).Seconds()},
		{"neither", 10 * time.Microsecond, 256 << 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rateMeter{bps: 1}
			r.add(256<<10, 10*time.Microsecond, 0)
			r.add(256<<10, 0, 0) // a figure's look: the client took nothing
			if r.figure(512 << 10) {
				t.Fatalf("a figure of %.0f B/s from writes that did not wait while the pipe gained", r.bps)
			}
			r.add(256<<10, tc.then, 512<<10)
			took := r.figure(tc.after)
			switch {
			case tc.bps == 0 && (took || r.bps != 1):
				t.Errorf("a figure of %.0f B/s (took %v), want none", r.bps, took)
			case tc.bps != 0 && (!took || r.bps < tc.bps*0.99 || r.bps > tc.bps*1.01):
				t.Errorf("%.0f B/s (took %v), want %.0f", r.bps, took, tc.bps)
			}
		})
	}
}
