package main

import (
	"bytes"
	"debug/elf"
	"io"
	"os"
	"sync"
)

// buildName names this binary for the daemon's hello: the version, and the
// content part of the Go build ID, which any change to the binary
// changes. A relay and a daemon serve each other only when their builds
// are equal, so a daemon left running across an upgrade is never
// silently served by a newer relay.
var buildName = sync.OnceValue(func() string {
	if id := goBuildID(); id != "" {
		return version() + " (" + id + ")"
	}
	return version()
})

// goBuildID returns the last part of the executable's Go build ID (the
// hash of its content), or "" if it cannot be read: from the ELF note on
// Linux, else (a Mach-O binary on macOS) from the text the linker puts at
// the start of the text segment, as cmd/go reads it.
func goBuildID() string {
	id := elfBuildID()
	if id == nil {
		id = rawBuildID()
	}
	if len(id) == 0 {
		return ""
	}
	return string(id[bytes.LastIndexByte(id, '/')+1:])
}

func elfBuildID() []byte {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return nil
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return nil
	}
	note, err := s.Data()
	// An ELF note: namesz, descsz, type (4 bytes each), "Go\x00\x00", desc.
	const head = 16
	if err != nil || len(note) <= head || !bytes.Equal(note[12:16], []byte("Go\x00\x00")) {
		return nil
	}
	return bytes.TrimRight(note[head:], "\x00")
}

// rawBuildID finds `\xff Go build ID: "ID"\n \xff` in the first 32 KiB
// of the executable.
func rawBuildID() []byte {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	f, err := os.Open(exe)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, 32<<10)
	n, _ := io.ReadFull(f, buf) // Best effort: a short file has no ID.
	return findBuildID(buf[:n])
}

// findBuildID returns the ID of the first `\xff Go build ID: "ID"\n \xff`
// in b, or nil.
func findBuildID(b []byte) []byte {
	_, rest, ok := bytes.Cut(b, []byte("\xff Go build ID: \""))
	if !ok {
		return nil
	}
	id, _, ok := bytes.Cut(rest, []byte("\"\n \xff"))
	if !ok {
		return nil
	}
	return id
}
