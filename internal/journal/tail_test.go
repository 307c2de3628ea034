package journal

import (
	"bytes"
	"testing"
)

// checkTail writes each of writes to a tailBuf of size bytes and checks
// what it keeps against the tail of them all, and that it never holds
// more than size bytes.
func checkTail(t *testing.T, size int, writes [][]byte) {
	t.Helper()
	var tb tailBuf
	var all []byte
	for _, w := range writes {
		tb.write(w, size)
		all = append(all, w...)
		if cap(tb.b) > size {
			t.Fatalf("size %d: holds %d bytes", size, cap(tb.b))
		}
	}
	if got, want := tb.bytes(), tail(all, size); !bytes.Equal(got, want) {
		t.Errorf("size %d, writes %q: kept %q, want %q", size, writes, got, want)
	}
}

func TestTailBuf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		size   int
		writes []string
	}{
		{"nothing", 4, nil},
		{"less than the size", 8, []string{"ab", "cd"}},
		{"exactly the size", 4, []string{"ab", "cd"}},
		{"one write over it", 4, []string{"abcdefg"}},
		{"wraps once", 4, []string{"abc", "de"}},
		{"wraps many times", 5, []string{"abc", "def", "ghi", "jk", "l", "mnopq", "rs"}},
		{"a long write after a wrap", 4, []string{"abc", "de", "fghijkl"}},
		{"empty writes", 3, []string{"", "ab", "", "cde", ""}},
		{"size zero", 0, []string{"abc", "d"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var writes [][]byte
			for _, w := range c.writes {
				writes = append(writes, []byte(w))
			}
			checkTail(t, c.size, writes)
		})
	}
}

// FuzzTailBuf: data cut into writes at the lengths cuts gives.
func FuzzTailBuf(f *testing.F) {
	f.Add(uint8(5), []byte("abcdefghijklmnop"), []byte{3, 1, 7, 0, 2})
	f.Fuzz(func(t *testing.T, size uint8, data, cuts []byte) {
		var writes [][]byte
		for _, c := range cuts {
			n := min(int(c), len(data))
			writes, data = append(writes, data[:n]), data[n:]
		}
		checkTail(t, int(size), append(writes, data))
	})
}
