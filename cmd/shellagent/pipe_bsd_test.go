//go:build darwin || freebsd

package main

// unreadIoctl counts a pipe's unread bytes (waitPipeFull): FIONREAD,
// _IOR('f', 127, int), which golang.org/x/sys/unix does not name here.
const unreadIoctl = 0x4004667f
