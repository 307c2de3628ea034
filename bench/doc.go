// Package bench holds shellagent's end-to-end benchmarks: a child writing in
// a PTY, the supervisor, the connection's single writer and the NDJSON
// stream on a real kernel pipe, read and decoded by a client in the
// benchmark's process, with the agent in the same process or, for
// BenchmarkBinary and BenchmarkDaemon, the built binary as a process of its
// own. Each benchmark measures its own physical baseline (a raw PTY loop
// with no agent, for throughput in a process of its own) in the same run,
// so that its figures compare across machines. See README.md for what each
// benchmark measures and how to run them; the code is in the _test.go
// files.
package bench
