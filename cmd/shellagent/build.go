package main

import (
	"bytes"
	"debug/elf"
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
// hash of its content), or "" if it cannot be read.
func goBuildID() string {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return ""
	}
	note, err := s.Data()
	// An ELF note: namesz, descsz, type (4 bytes each), "Go\x00\x00", desc.
	const head = 16
	if err != nil || len(note) <= head || !bytes.Equal(note[12:16], []byte("Go\x00\x00")) {
		return ""
	}
	id := bytes.TrimRight(note[head:], "\x00")
	return string(id[bytes.LastIndexByte(id, '/')+1:])
}
