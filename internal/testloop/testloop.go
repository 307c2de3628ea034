// Package testloop holds the rules of the contributor's test loop,
// go test ./..., which finishes in two minutes on a quiet 2-core machine
// once the build cache is warm, and passes on a loaded one:
//
//   - Long tests run only when SHELLAGENT_LONG=1, as .ci/run sets it:
//     soaks, interop with outside clients (the npm packages, sshd), and
//     full-size or real-process forms of rules that the quick run checks
//     with a short form or a unit test. A test gated by Long names, in its
//     doc comment, the quick test that checks its rule, unless it is pure
//     soak or interop.
//   - A test never asserts a wall-clock bound tighter than Bound of the
//     promise it checks; the promise itself is measured in bench/. A
//     wait for what is bound to happen, with no promise of when, is Wait.
//   - A package whose tests wait on the clock runs more of them at once
//     than there are cores (Parallel): go test runs as many packages at
//     a time as there are cores, and each holds its place until its
//     longest chain of tests ends.
package testloop

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// LongEnv names the variable that, set to 1, runs the long tests.
const LongEnv = "SHELLAGENT_LONG"

// Enabled reports whether the long tests run (SHELLAGENT_LONG=1), for a
// test that picks its size by it.
func Enabled() bool { return os.Getenv(LongEnv) == "1" }

// Long skips t unless the long tests run; what says why t is long (a soak,
// interop with a named client).
func Long(t testing.TB, what string) {
	t.Helper()
	if !Enabled() {
		t.Skipf("long test (%s): set %s=1 to run it", what, LongEnv)
	}
}

// Bound is the most a test may wait for a wall-clock promise before it
// fails: three times the promise, so that a loaded machine (two other
// test suites beside this one) does not fail a test that the code passes.
func Bound(promise time.Duration) time.Duration { return 3 * promise }

// Wait is how long a test waits for something that is bound to happen
// but makes no promise of when (a process to start, a line to arrive, a
// shutdown to finish) before it fails: long enough for a machine running
// three test suites at once, where a wait of a few seconds was seen to
// fail. It bounds only a test that is failing anyway; a promise is
// checked with Bound.
const Wait = 2 * time.Minute

// Parallel is for the TestMain of a package whose tests wait on the clock
// (kill graces, stall timeouts, paced clients, processes starting) more
// than on the cores: it runs n of the tests marked t.Parallel at a time,
// or GOMAXPROCS if more, where the default is GOMAXPROCS (2 on a 2-core
// machine, which left the cores idle). A -parallel on the command line
// wins. It panics if the testing flags are not registered (call it from
// TestMain).
func Parallel(n int) {
	given := false
	if flag.Parsed() {
		flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	} // else m.Run parses the command line after this, and it wins
	if given {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(max(n, runtime.GOMAXPROCS(0)))); err != nil {
		panic(fmt.Sprintf("testloop.Parallel: %v", err))
	}
}
