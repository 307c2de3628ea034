// Package jsonrpcline reads and writes JSON-RPC 2.0 as ACP carries it:
// one message per line. It is the framing the agent's connection
// (protocol), the relay, the reference client (lineclient) and
// shellagent replay share, so that each reads a line, refuses a bad one
// and writes an error exactly as the agent does.
//
// What it holds: the size cap on a line (a line over it is refused as
// soon as the cap is passed and skipped without being held in memory),
// the checks the agent makes of each line with the error response it
// answers a bad one with, the kinds of id it carries back as written
// (strings, and integers in int64 however JSON writes them: 1.0, 1e2,
// -0), the classification of a message (request, notification, response,
// error) and the shape of an error response (acp.Error).
//
// protocol/acptest frames lines on its own on purpose: it is the
// independent oracle the tests hold the agent to.
//
// Files: reader.go (Reader: lines under the cap, and messages with the
// agent's refusals), check.go (Check: the envelope, its Kind, the
// refusals), id.go (ValidID, IntID: the ids carried back), write.go
// (ErrorResponse, the one error shape).
package jsonrpcline
