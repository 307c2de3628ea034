module shellagent

go 1.26.0

require (
	github.com/creack/pty v1.1.24
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/sourcegraph/jsonrpc2 v0.2.3
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require golang.org/x/text v0.14.0 // indirect
