package acptest

// reporter is the part of testing.TB that the Client uses. It lets the
// package's own tests record failures instead of failing; testing.TB
// satisfies it.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(f func())
}
