// Package kit is the contract between a session (package supervisor) and
// the client developers' kit (package scenario), which plays outside the
// session's core. The session knows of the kit only through a Kit (the
// /scenario command), the Overlay a playing scenario lays over it, which
// it consults where it reports its list and where it dispatches a cancel,
// and the Foreground that holds a turn for it. The kit drives the session
// through a Session (Session.Do) and the Scene it is given there, with the
// ways in that real events use: its commands, wakeups and watches are the
// session's own work.
//
// The session gives a Scene its Host, the few ways in a scenario needs
// that a kind of work does not (a made-up update, a crafted snapshot, the
// foreground turn it holds, a command run with the kit's options); the
// rest is the session's work.Host, through which the kit schedules its
// wakeups (supervisor/jobs) and starts its watches (supervisor/watch) as
// any kind of work does.
//
// Files: kit.go (Kit, Overlay, Foreground, Session, Host), scene.go (the
// Scene, and what it starts: a Command, a Call).
package kit

import (
	"context"

	"shellagent/acp"
	"shellagent/supervisor/work"
)

// Kit serves /scenario (supervisor.Config.Kit).
type Kit interface {
	// Listing is what /scenario alone says; v1 says the client speaks
	// ACP v1.
	Listing(v1 bool) string
	// Play reads /scenario's arguments (a name, and a hold) and plays
	// that scenario in the session of sc: it takes the turn of /scenario
	// (Scene.Hold), or ends it saying why not (Scene.Refuse). On the
	// actor.
	Play(sc *Scene, args string)
}

// An Overlay is what a playing scenario lays over its session
// (Scene.Lay): items it lists beside the session's own work, and cancels
// it takes. Its methods run on the session's actor.
type Overlay interface {
	// Listed returns what it lists after the session's own work.
	Listed() []acp.BackgroundItem
	// Cancel is asked first of each cancel of id: terminal/cancel (or
	// /stop) of a terminal if terminal, tool_call/cancel (or /stop) of a
	// tool call the session does not know otherwise. running says
	// whether id is a terminal of the session that has not exited. If it
	// takes the cancel, the session answers with err (nil: accepted) and
	// does nothing more. What the kit made up and reported ended
	// (Scene.Ended) is the session's to answer, the overlay's or not.
	Cancel(terminal bool, id string, running bool) (taken bool, err error)
	// Resumed brings a client that resumes up to date on what the overlay
	// runs and made up (Scene.Current, Scene.Send).
	Resumed(sc *Scene)
	// Closing says the session closes: the overlay lets go of it.
	Closing()
}

// A Foreground is the kit's work in a turn that holds the foreground
// (Scene.Hold, Scene.Begin). Its methods run on the session's actor.
type Foreground interface {
	// Began says the turn that Scene.Begin asked for holds the
	// foreground.
	Began(sc *Scene)
	// CancelTurn serves session/cancel of the turn it holds.
	CancelTurn(sc *Scene)
	// Dropped says the turn that Scene.Begin asked for was dropped while
	// held: it will not come.
	Dropped()
}

// A Session is a session as the kit enters it (a supervisor.Session).
// Its methods may be called from any goroutine but the session's actor.
type Session interface {
	// Do runs f on the session's actor, in turn with its other ways in,
	// and returns once f has run and settled.
	Do(f func(sc *Scene))
	// Idle reports whether no foreground work runs or waits in the
	// session, without waiting for slow work.
	Idle() bool
}

// A Host is the session of a Scene, for the length of one entry on its
// actor. Its methods but Work are the Scene's of the same name, which say
// what each does; Refuse and Hold only in Kit.Play, Current only in
// Overlay.Resumed.
type Host interface {
	// Work is the session as a kind of work sees it: valid for as long
	// as the session lives.
	Work() work.Host
	Session() Session
	V1() bool
	Overlay() Overlay
	Lay(o Overlay)
	Refuse(why string, usage bool)
	Hold(fg Foreground)
	Begin(fg Foreground)
	Running(meta map[string]any)
	Holds(fg Foreground) bool
	End(fg Foreground, stopReason string, failure *acp.Error)
	Send(u acp.Update)
	Snapshot(state, stopReason string, meta map[string]any) *acp.StateUpdate
	Report(u acp.Update)
	ReportState()
	Relist()
	NewID(terminal bool) string
	Ended(terminal bool, id, status string)
	Run(line string, l Launch) (c Command, ok bool)
	Current(c Command)
	Ask(ctx context.Context, req *acp.PermissionRequest, answer func(*acp.PermissionResponse, error)) bool
}
