//go:build !linux

package stack

import "time"

// TreeStats is 0, 0 where /proc is not; see the Linux version.
func TreeStats(pids []int) (rssBytes int64, cpu time.Duration) { return 0, 0 }
