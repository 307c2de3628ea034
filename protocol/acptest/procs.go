package acptest

import (
	"bytes"
	"os"
	"strconv"
)

// ProcessesWith lists the live processes whose environment contains the
// entry env (such as "SHELLAGENT_TEST=xyz"). A test that gives the agent a
// unique entry finds with it every process the agent started, however far
// they were reparented, to prove that none was left behind. Zombies are not
// live.
func ProcessesWith(env string) []int {
	var out []int
	ents, err := os.ReadDir("/proc")
	if err != nil {
		// Without /proc no leak check can pass honestly.
		panic("acptest: scanning for leftover processes: " + err.Error())
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		environ, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(environ, append([]byte(env), 0)) {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err != nil || zombie(stat) {
			continue // gone since its environment was read, or a zombie
		}
		out = append(out, pid)
	}
	return out
}

// zombie reports whether a /proc/PID/stat line is a zombie's (or unreadable).
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z'
}
