package main

import (
	"os"
	"runtime"
)

// shareCPUs leaves half of the processors to the programs shellagent runs
// and to its client: unless $GOMAXPROCS says otherwise, Go code runs on at
// most half of them (at least one). A flood has three busy parties besides
// the agent (the command, the kernel's PTY work, the client reading the
// pipe); on two cores a second P makes the runtime wake an idle thread at
// every hand-off between the PTY reader and the writer, a context switch
// each, where one P hands off on its own thread. Measured in bench/HISTORY.md
// ("Round 6 (issue 26): one P on two cores"): on zeros 0.79 → 0.92 of a
// raw drain, the agent's CPU −25 %, its context switches −30 %.
func shareCPUs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)/2))
}
