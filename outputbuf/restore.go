package outputbuf

import "fmt"

// Cap returns how many bytes the ring keeps at most.
func (r *Ring) Cap() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.capacity
}

// Restore returns a ring of capacity that holds data as the bytes just
// before absolute offset end, as the ring that Snapshot gave them did: a
// reader's offsets go on as they were (an upgrade in place hands a
// terminal's ring over this way). data must be all that ring held: its
// last min(end, capacity) bytes, or nothing (a compacted ring's).
func Restore(capacity int, data []byte, end int64) (*Ring, error) {
	r := New(capacity)
	if want := min(end, int64(r.capacity)); len(data) > 0 && int64(len(data)) != want {
		return nil, fmt.Errorf("restore a ring of %d bytes ending at %d: got %d bytes, want %d", capacity, end, len(data), want)
	}
	r.total = end - int64(len(data))
	if len(data) > 0 {
		r.write(data)
	}
	return r, nil
}
