package acptest

import (
	"encoding/base64"
	"fmt"
)

// termKey identifies a terminal: terminal ids are unique within a session.
type termKey struct{ session, terminal string }

// terminals holds the output of every terminal as the client
// reconstructs it. It is the Client's, under its mu.
type terminals map[termKey]*termBuf

// termBuf is a terminal's output as the client reconstructs it.
type termBuf struct {
	data      []byte
	snapshots int
}

// Output returns a copy of a terminal's output as a client reconstructs it:
// the decoded terminal_output_chunk data appended in order, replaced by each
// non-null terminal_update.output; in ACP v1, the data strings of
// _meta.terminal_output appended in order, as UTF-8. Sending session/resume with a replayFrom
// (or, in v1, session/load) starts the session's terminals over, as the
// replay re-sends their output.
func (c *Client) Output(sessionID, terminalID string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tb := c.terms[termKey{sessionID, terminalID}]; tb != nil {
		return append([]byte(nil), tb.data...)
	}
	return nil
}

// Snapshots returns how many replacement snapshots (non-null
// terminal_update.output) a terminal got.
func (c *Client) Snapshots(sessionID, terminalID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tb := c.terms[termKey{sessionID, terminalID}]; tb != nil {
		return tb.snapshots
	}
	return 0
}

// reconstruct applies a terminal_output_chunk or an output snapshot to its
// terminal and returns what is wrong with it; in ACP v1 (version 1), a
// tool call update's _meta.terminal_output (whose rules Check verifies).
func (ts terminals) reconstruct(m *Msg, version int) []string {
	if version == 1 {
		if out := m.Meta("terminal_output"); out != nil {
			id, _ := out["terminal_id"].(string)
			data, _ := out["data"].(string)
			tb := ts.term(m.SessionID, id)
			tb.data = append(tb.data, data...)
		}
		return nil
	}
	switch m.Kind {
	case "terminal_output_chunk":
		data, ok := m.Update["data"].(string)
		if !ok || m.TerminalID() == "" {
			return nil // the schema check reports it
		}
		tb := ts.term(m.SessionID, m.TerminalID())
		var err error
		if tb.data, err = appendBase64(tb.data, data); err != nil {
			return []string{fmt.Sprintf("terminal %s: terminal_output_chunk data is not valid base64: %v", m.TerminalID(), err)}
		}
	case "terminal_update":
		out, ok := m.Update["output"].(map[string]any)
		if !ok || m.TerminalID() == "" {
			return nil
		}
		data, ok := out["data"].(string)
		if !ok {
			return nil // the schema check reports it
		}
		tb := ts.term(m.SessionID, m.TerminalID())
		tb.snapshots++
		var err error
		if tb.data, err = appendBase64(tb.data[:0], data); err != nil {
			return []string{fmt.Sprintf("terminal %s: terminal_update output.data is not valid base64: %v", m.TerminalID(), err)}
		}
	}
	return nil
}

// term returns the buffer of a terminal, creating it.
func (ts terminals) term(session, terminal string) *termBuf {
	k := termKey{session, terminal}
	tb := ts[k]
	if tb == nil {
		tb = &termBuf{}
		ts[k] = tb
	}
	return tb
}

// reset forgets the output of a session's terminals.
func (ts terminals) reset(session string) {
	for k := range ts {
		if k.session == session {
			delete(ts, k)
		}
	}
}

// appendBase64 appends the standard-base64 decoding of s to dst, doubling
// its capacity when it must grow. On error dst is returned unchanged.
func appendBase64(dst []byte, s string) ([]byte, error) {
	n := len(dst)
	if need := n + base64.StdEncoding.DecodedLen(len(s)); need > cap(dst) {
		grown := make([]byte, n, max(need, 2*cap(dst)))
		copy(grown, dst)
		dst = grown
	}
	k, err := base64.StdEncoding.Decode(dst[n:cap(dst)], []byte(s))
	if err != nil {
		return dst[:n], err
	}
	return dst[:n+k], nil
}
