// Package v1front serves ACP v1 clients over the same Agent as v2: it is
// the protocol.Front a Conn is given for version 1
// (protocol.Options.Fronts[ProtocolVersion] = New), wired where the
// connections are made (cmd/shellagent's connOptions, for stdio and the
// daemon). It turns a v1 client's requests into calls of the Agent, which
// never knows that its client speaks v1, answers a v1 session/prompt when
// its turn ends, and writes what the Agent reports in v2 shapes as v1
// messages, with the connection's writer doing the ordering, coalescing
// and flow control as for v2. Package protocol knows nothing of v1 but
// the Front interface; this package imports protocol, never the reverse.
//
// Files: front.go (v1Front: the requests, the turn each prompt waits
// for, holding updates while a client attaches, initialize), encoding.go
// (acpV1, the protocol.Encoding: updates and terminal output as v1
// messages and _meta.terminal_output), types.go (the v1 wire types, from
// testdata/acp/schema.v1.json, and the texts v1 needs where v2 has
// a field), text.go (terminal output as UTF-8 JSON strings across chunk
// boundaries, and the tail a client without terminals gets).
package v1front
