// Package protocol is the connection that carries ACP (package acp) over a
// byte stream: newline-delimited JSON-RPC 2.0, read by one loop that hands
// each request to an Agent, and written by one writer that interleaves
// control messages with terminal output under flow control.
//
// A Conn serves one peer. The peer chooses the version with initialize:
// v2 is served as the Agent speaks it; another version goes through the
// Front made for it (Options.Fronts: protocol/v1front serves v1), which
// adapts that wire to the same Agent, so that the Agent never knows the
// version. The Conn knows a front only as a Front: it hands it the
// requests after initialize (Front.Method, with AnswerNow and
// AnswerLater), and the front reports through the Wire it was made with,
// written by the same writer under the front's Encoding. The Agent reports to the peer through the Client the Conn hands
// it; a terminal's output is read by the writer from the terminal's
// OutputSource when it gets to it.
//
// Files: conn.go (the Conn: the read loop, the requests it hands to the
// Agent, the Client the Agent reports to, the Observer it tells of what
// client-side rules concern), clientcheck.go (ClientChecks, the Observer
// that checks the rules only the connection sees), stream.go (the jsonrpc2
// stream over internal/jsonrpcline's lines, refusals and ids, and the ids
// jsonrpc2 cannot hold as numbers), params.go (decoding params, errors as
// JSON-RPC errors),
// writer.go (the single writer), queue.go (what waits for the client, and
// the coalescing for a stalled one), backlog.go (the bound on replies that
// stops reading input), peer.go (the client's progress and stalls) with
// kernel.go, kernel_linux.go and kernel_other.go (the kernel's buffer
// between them), output.go (OutputSource), encoding.go (v2 lines), and
// front.go (Front, the Wire it reports through, its Methods and its
// Encoding, as the Conn and the writer take them).
package protocol
