package record

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"shellagent/acp"
)

// Session states in session/list's _meta.shellagent.state.
const (
	attached = "attached" // live, reporting to a client
	detached = "detached" // live, with no client
	past     = "past"     // only in the history: resuming it makes it live again
	// live in another process that shares the state directory (another
	// stdio agent, or the daemon): it cannot be resumed here.
	elsewhere = "elsewhere"
)

// ListPage is how many sessions one session/list answer holds at most.
const ListPage = 100

// Live is a live session as session/list lists it.
type Live struct {
	ID, Cwd, Title string
	UpdatedAt      time.Time // when it last reported
	Attached       bool      // reporting to a client
	Terminals      []string  // the ids of its running terminals
}

// List serves session/list: the live sessions (live, oldest first) and
// the past ones of the history (read again first, for what other
// processes changed), the most recently updated first, a page at a time;
// a session both live and in the history is listed once, as live. A
// cursor that is no nextCursor of a page is -32602.
func (hs Histories) List(p *acp.ListSessionsRequest, live []Live) (*acp.ListSessionsResponse, error) {
	type row struct {
		info acp.SessionInfo
		key  string // the order: updatedAt (RFC 3339 UTC, nanoseconds) descending, then id
	}
	var rows []row
	isLive := make(map[string]bool)
	// _meta.shellagent: attached to a connection, detached, or past, and
	// the terminals that run (shellagent client's /sessions shows them).
	add := func(info acp.SessionInfo, at string, state string, terminals []string) {
		if p.Cwd != nil && filepath.Clean(*p.Cwd) != filepath.Clean(info.Cwd) {
			return
		}
		info.Meta = map[string]any{"shellagent": map[string]any{"state": state, "terminals": terminals}}
		rows = append(rows, row{info, at + "\x00" + info.SessionID})
	}
	for _, s := range live {
		isLive[s.ID] = true
		info := acp.SessionInfo{SessionID: s.ID, Cwd: s.Cwd, Title: s.Title, UpdatedAt: s.UpdatedAt.UTC().Format(rfc3339)}
		add(info, s.UpdatedAt.UTC().Format(sortable), map[bool]string{true: attached, false: detached}[s.Attached], s.Terminals)
	}
	if store := hs.Store; store != nil {
		if err := store.Refresh(); err != nil {
			hs.Log.Warn("session/list: reading the history again", "err", err)
		}
		for _, h := range store.List() {
			if isLive[h.ID] {
				continue
			}
			info := acp.SessionInfo{SessionID: h.ID, Cwd: h.Cwd, Title: h.Title, UpdatedAt: h.UpdatedAt.UTC().Format(rfc3339)}
			add(info, h.UpdatedAt.UTC().Format(sortable), map[bool]string{false: past, true: elsewhere}[h.Elsewhere], []string{})
		}
	}
	sortRows := func(a, b row) int { return -strings.Compare(a.key, b.key) }
	slices.SortFunc(rows, sortRows)
	start := 0
	if p.Cursor != nil {
		after, err := readCursor(*p.Cursor)
		if err != nil {
			return nil, err
		}
		// The first row past the cursor: rows are sorted by key, descending.
		start, _ = slices.BinarySearchFunc(rows, after, func(r row, key string) int { return -strings.Compare(r.key, key) })
		if start < len(rows) && rows[start].key == after {
			start++
		}
	}
	out := &acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	for i := start; i < len(rows); i++ {
		if len(out.Sessions) == ListPage {
			next := base64.RawURLEncoding.EncodeToString([]byte(rows[i-1].key))
			out.NextCursor = &next
			break
		}
		out.Sessions = append(out.Sessions, rows[i].info)
	}
	return out, nil
}

// CheckPages checks pages, session/list's answers one after the other,
// each asked with the nextCursor of the one before, against what List
// promises: every page but the last holds ListPage sessions and a
// nextCursor, the last has none, no session is listed twice, and none
// comes after one updated later. It returns the sessions of every page,
// in order, or the first error that says what breaks the promise.
func CheckPages(pages ...*acp.ListSessionsResponse) ([]acp.SessionInfo, error) {
	var all []acp.SessionInfo
	seen := make(map[string]bool)
	for i, p := range pages {
		last := i == len(pages)-1
		switch {
		case !last && (len(p.Sessions) != ListPage || p.NextCursor == nil):
			return nil, fmt.Errorf("page %d of %d has %d sessions, a nextCursor: %v; want %d and a nextCursor", i+1, len(pages), len(p.Sessions), p.NextCursor != nil, ListPage)
		case last && p.NextCursor != nil:
			return nil, fmt.Errorf("the last page, %d, has a nextCursor", i+1)
		}
		for _, s := range p.Sessions {
			if seen[s.SessionID] {
				return nil, fmt.Errorf("%s is listed twice", s.SessionID)
			}
			seen[s.SessionID] = true
			if n := len(all); n > 0 && s.UpdatedAt > all[n-1].UpdatedAt {
				return nil, fmt.Errorf("%s (updated %s) comes after one updated %s", s.SessionID, s.UpdatedAt, all[n-1].UpdatedAt)
			}
			all = append(all, s)
		}
	}
	return all, nil
}

// readCursor reads a cursor of session/list: the key of the last row of
// the page before.
func readCursor(cursor string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	at, id, ok := strings.Cut(string(b), "\x00")
	if err == nil && ok && id != "" {
		if _, err = time.Parse(sortable, at); err == nil {
			return string(b), nil
		}
	}
	return "", acp.InvalidParams("cursor: unknown cursor %q (pass the nextCursor of the previous page)", cursor)
}

const (
	rfc3339  = "2006-01-02T15:04:05Z07:00"
	sortable = "2006-01-02T15:04:05.000000000Z" // fixed width: sorts as it reads
)
