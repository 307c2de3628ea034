// Package fswatch watches a file, or a directory with everything under
// it, and reports that something in it changed, for /watch (package
// supervisor, which debounces the reports and runs the command).
//
// What it guarantees: Watch calls changed after each batch of changes
// (writes, creations, removals, renames, new attributes; reading is no
// change) and failed at most once, when it can watch no more (the path
// went away, or the tree grew past the watch's share); neither is called
// once Close has returned, and both are called on the watch's one
// goroutine, which Close waits for. One watch takes at most its share of
// the user's inotify watches (Share: an eighth, at most MaxDirs), and a
// tree with more directories is refused, saying so.
//
// Watching is inotify on Linux (watch_linux.go); elsewhere Watch refuses
// with why (watch_other.go).
package fswatch

// MaxDirs is the most directories one watch watches, whatever the user's
// limit: /watch / alone would otherwise take tens of thousands of the
// inotify watches that every program of the user shares. Tests lower it.
var MaxDirs = 16384
