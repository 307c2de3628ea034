// Package protocol is the connection that carries ACP (package acp) over a
// byte stream: newline-delimited JSON-RPC 2.0, read by one loop that hands
// each request to an Agent, and written by one writer that interleaves
// control messages with terminal output under flow control.
//
// A Conn serves one peer. The peer chooses the version with initialize:
// v2 is served as the Agent speaks it; v1 goes through a v1 front that
// adapts the v1 wire to the same Agent, so that the Agent never knows the
// version. The Agent reports to the peer through the Client the Conn hands
// it; a terminal's output is read by the writer from the terminal's
// OutputSource when it gets to it.
package protocol
