// Package acptest is a strict Agent Client Protocol (ACP) test client, for
// v2 and, with an option, v1.
//
// A [Client] talks to an agent over the agent's stdin and stdout exactly as a
// real client would: it sees only the bytes on the wire and shares no code
// with the agent. A reader goroutine reads every line the agent writes,
// records it in the transcript, validates it, and dispatches it:
//
//   - every line must be a single JSON-RPC 2.0 object;
//   - every message must validate against the official v2 wire schema
//     (testdata/acp/schema.v2.json), and its payload against the specific
//     definition it claims to be (session updates, permission requests, the
//     result of each request the client sent, error objects), and a
//     permission request (with its v1 toolCall) has no member its
//     definition does not declare;
//   - every response must answer a request the client sent, once;
//   - terminal output is reconstructed per terminal from output chunks and
//     replacement snapshots, as a client that renders terminals must do it.
//
// Such wire violations are reported with t.Errorf as soon as they are read.
// [Client.Check] additionally verifies the ordering rules of the v2
// "background work" RFD and of the shellagent contract over the transcript;
// [Client.Violations] returns the same findings without reporting them.
//
// With [WithProtocolV1] the client speaks ACP v1 instead: messages are
// validated against testdata/acp/schema.v1.json, terminal output is
// reconstructed from the _meta.terminal_output strings of tool call
// updates, and Check verifies the v1 rules (tool calls announced before
// they are updated, the _meta terminal flow).
// Either way, the client speaks the version that the latest successful
// initialize answered with, from that answer on, as the v2 schema makes
// the latest successful initialize authoritative: a client that
// initializes again with the other version is validated, and checked,
// in that one.
//
// Files: client.go (the Client, its options and its waits, the agent's
// stdin), binary.go (StartBinary), reader.go (the reader: the read loop,
// each line's inspection, and dispatch), scan.go (a fast
// first pass over each line), schema.go (validation against the
// schemas), msg.go (Msg: a line as recorded), terminal.go (terminals
// rebuilt from output), check.go (Check and the rules), view.go (View: a
// session as a conforming client sees it), procs.go (ProcessesWith),
// report.go (what of testing.TB the Client uses).
package acptest
