package scenario

import (
	"os"
	"sync"
	"testing"

	"shellagent/internal/sessiontest"
	"shellagent/protocol/acptest"
	"shellagent/supervisor"
	"shellagent/supervisor/kit"
)

func TestMain(m *testing.M) { sessiontest.Main(m) }

// harness is one agent, with the kit, served over pipes to a strict test
// client (sessiontest.Harness).
type harness struct {
	*sessiontest.Harness
	sup *supervisor.Supervisor
	kit *seenKit
}

// seenKit is the Kit that remembers the session it last played in, for
// what no client can see (await).
type seenKit struct {
	Kit
	mu   sync.Mutex
	last kit.Session
}

func (k *seenKit) Play(sc *kit.Scene, args string) {
	k.mu.Lock()
	k.last = sc.Session()
	k.mu.Unlock()
	k.Kit.Play(sc, args)
}

func newHarness(t *testing.T, cfg supervisor.Config) *harness {
	t.Helper()
	marker := sessiontest.Marker()
	cfg.Env = append(os.Environ(), marker)
	cfg.Shell, cfg.Launcher = "/bin/sh", sessiontest.Launcher
	cfg.Log = sessiontest.Log(t)
	k := &seenKit{Kit: Kit{Log: cfg.Log}}
	if cfg.Kit != nil {
		k.Kit = cfg.Kit.(Kit)
	}
	cfg.Kit = k
	sup := supervisor.New(cfg)
	return &harness{Harness: sessiontest.New(t, sup, cfg.Log, marker), sup: sup, kit: k}
}

// on returns the harness's helpers for another of its clients.
func (h *harness) on(c *acptest.Client) *harness {
	h2 := *h
	h2.Harness = h.Harness.On(c)
	return &h2
}

// await polls the session the kit last played in until cond holds.
func (h *harness) await(what string, cond func(sc *kit.Scene) bool) {
	h.T.Helper()
	h.kit.mu.Lock()
	s := h.kit.last
	h.kit.mu.Unlock()
	sessiontest.Poll(h.T, what, func() bool {
		ok := false
		s.Do(func(sc *kit.Scene) { ok = cond(sc) })
		return ok
	})
}

var sameIDs = sessiontest.SameIDs
