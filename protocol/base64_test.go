package protocol

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAppendBase64 checks appendBase64 against encoding/base64 for every
// length around the vector steps' edges (32 bytes out for 24 in, a first
// block loaded under a mask), with bytes of every value, after a prefix,
// into slices with and without room.
func TestAppendBase64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 4096)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	lengths := []int{1000, 1023, 1024, 1025, 4095, 4096}
	for n := range 200 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, off := range []int{0, 1, 3, 7} {
			if off+n > len(src) {
				continue
			}
			p := src[off : off+n]
			want := base64.StdEncoding.AppendEncode([]byte("prefix"), p)
			for _, dst := range [][]byte{[]byte("prefix"), append(make([]byte, 0, 8192), "prefix"...)} {
				if got := appendBase64(dst, p); !bytes.Equal(got, want) {
					t.Fatalf("appendBase64 of %d bytes at offset %d:\n got %q\nwant %q", n, off, got, want)
				}
			}
		}
	}
}

// TestAppendBase64ReadsOnlyItsInput encodes inputs that end at the last
// byte before a page the process may not read, and start at the first
// byte after one: an encoder that loads a vector past either end of its
// input faults.
func TestAppendBase64ReadsOnlyItsInput(t *testing.T) {
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	if err := unix.Mprotect(mem[:page], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(mem[2*page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	body := mem[page : 2*page]
	for n := range 100 {
		for _, p := range [][]byte{body[:n], body[len(body)-n:]} {
			want := base64.StdEncoding.EncodeToString(p)
			if got := appendBase64(nil, p); string(got) != want {
				t.Fatalf("appendBase64 of %d bytes: got %q, want %q", n, got, want)
			}
		}
	}
	if got, want := appendBase64(nil, body), base64.StdEncoding.EncodeToString(body); string(got) != want {
		t.Fatalf("appendBase64 of a page: got %q, want %q", got, want)
	}
}

// FuzzAppendBase64 checks appendBase64 against encoding/base64.
func FuzzAppendBase64(f *testing.F) {
	f.Add([]byte("prefix"), []byte("hello, world\r\n"))
	f.Add([]byte(nil), bytes.Repeat([]byte{0xff, 0, 0x7f}, 40))
	f.Fuzz(func(t *testing.T, dst, p []byte) {
		dst, p = bytes.Clone(dst), bytes.Clone(p) // as in the writer, where the two never share memory
		want := base64.StdEncoding.AppendEncode(bytes.Clone(dst), p)
		if got := appendBase64(dst, p); !bytes.Equal(got, want) {
			t.Fatalf("appendBase64(%q, %q) = %q, want %q", dst, p, got, want)
		}
	})
}
