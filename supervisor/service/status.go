package service

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"shellagent/supervisor/work"
	"shellagent/termtext"
)

// An Outcome is how one service of an /up or /restart ended up.
type Outcome struct {
	Name  string
	Ready bool   // it was ready once and is still managed
	State State  // else: where it is
	Why   string // and what that came from
}

// UpSummary says how the services of an /up or /restart ended up.
func UpSummary(outcomes []Outcome) string {
	var ready, failed []string
	for _, o := range outcomes {
		if o.Ready {
			ready = append(ready, o.Name)
		} else {
			failed = append(failed, fmt.Sprintf("%s %s: %s", o.Name, o.State, o.Why))
		}
	}
	if len(failed) == 0 {
		return AllReady + strings.Join(ready, ", ") + "."
	}
	text := "Failed: " + strings.Join(failed, "; ") + "."
	if len(ready) > 0 {
		text += " Ready: " + strings.Join(ready, ", ") + "."
	}
	return text
}

// A Row is one service as /status shows it.
type Row struct {
	Name     string
	State    State
	Restarts int
	// Ports are the ports its run listens on where the system tells
	// (Linux), else the ports it declares.
	Ports []int
	// Running: a run runs, whose process is Pid, which started at
	// Started, and whose processes use RSS and CPU.
	Running bool
	Pid     int
	Started time.Time
	RSS     int64
	CPU     time.Duration
}

// StatusText is /status's answer for the stack of file: a table of rows,
// their uptimes as of now.
func StatusText(file string, rows []Row, now time.Time) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSTATE\tPID\tUPTIME\tRESTARTS\tRSS\tCPU\tPORTS")
	for _, r := range rows {
		pid, up, mem, used := "-", "-", "-", "-"
		if r.Running {
			pid = strconv.Itoa(r.Pid)
			up = work.Age(now.Sub(r.Started))
			mem = fmt.Sprintf("%.1fMiB", float64(r.RSS)/(1<<20))
			used = r.CPU.Round(10 * time.Millisecond).String()
		}
		ports := []string{"-"}
		for j, p := range r.Ports {
			ports = append(ports[:j], strconv.Itoa(p))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Name, r.State, pid, up, r.Restarts, mem, used, strings.Join(ports, ","))
	}
	w.Flush() // Safe: a strings.Builder takes every write.
	return "Services of " + file + ":\n" + termtext.Fence(strings.TrimSuffix(b.String(), "\n"))
}
