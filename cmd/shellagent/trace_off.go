//go:build !tracefile

package main

// startTrace does nothing: a build with -tags tracefile writes an
// execution trace of the process (trace_on.go).
func startTrace() (stop func()) { return func() {} }
