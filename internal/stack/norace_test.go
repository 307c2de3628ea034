//go:build !race

package stack

// raceSlowdown is how many times slower the race detector makes parsing:
// none, without it.
const raceSlowdown = 1
