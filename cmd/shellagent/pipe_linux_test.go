package main

import "golang.org/x/sys/unix"

// unreadIoctl counts a pipe's unread bytes (waitPipeFull).
const unreadIoctl = unix.TIOCINQ
