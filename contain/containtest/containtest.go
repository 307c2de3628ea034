// Package containtest holds the commands a package's tests start in a
// contain.Containment, as the agent holds a terminal's processes, and
// checks what is left when the tests end.
package containtest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"shellagent/contain"
)

// ModeEnv names the containment mode of the tests: auto if unset. CI runs
// the tests that start commands once more with "subreaper".
const ModeEnv = "SHELLAGENT_TEST_CONTAINMENT"

// Mode returns the mode ModeEnv names, Auto if it names none.
func Mode() contain.Mode {
	if s := os.Getenv(ModeEnv); s != "" {
		return contain.Mode(s)
	}
	return contain.Auto
}

// Main is a TestMain: it opens a Containment in Mode, sweeps what killed
// runs of the tests left behind, hands the Containment to use, and runs
// the tests under goleak's check. Then check, if not nil, looks for what
// the tests left (an error fails the run), and the Containment is closed,
// which kills anything still in it. Main does not return.
func Main(m *testing.M, use func(*contain.Containment), check func() error) {
	c, err := contain.Open(Mode())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, _, err := c.Sweep(); err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err) // the tests can run all the same
	}
	use(c)
	goleak.VerifyTestMain(run{m, c, check})
}

// run runs the tests, then checks and closes.
type run struct {
	m     *testing.M
	c     *contain.Containment
	check func() error
}

func (r run) Run() int {
	code := r.m.Run()
	if r.check != nil {
		if err := r.check(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if err := r.c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close containment:", err)
		code = 1
	}
	return code
}
