// Package waitfor reads what a wait waits for, in /wait's language, for
// /wait (package supervisor/wait) and for a service's ready key, which
// the stack file's load checks (package internal/stack) before the
// supervisor watches it (package supervisor/service).
//
// What it guarantees: a text Parse (or ParseReady) accepts is one /wait
// watches as written; one it refuses comes with the reason, which starts
// with the text.
package waitfor

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Target is what a wait waits for: exactly one of its fields is set.
type Target struct {
	Pattern *regexp.Regexp // a line of output that matches; compiled with (?m)
	Port    int            // a port of the loopback that accepts connections, 1 to 65535
	URL     string         // an http:// or https:// URL that answers
}

// Parse reads text as :PORT, an http:// or https:// URL, or a regular
// expression. Text that starts with ':' is a port and nothing else
// (":-1" is refused, not matched as a pattern; a pattern that starts with
// ':' is written \:), and a URL's port, if it has one, is 1 to 65535.
func Parse(text string) (Target, error) {
	if digits, ok := strings.CutPrefix(text, ":"); ok {
		return parsePortTarget(text, digits)
	}
	if strings.HasPrefix(text, "http://") || strings.HasPrefix(text, "https://") {
		return parseURL(text)
	}
	if _, err := regexp.Compile(text); err != nil {
		return Target{}, fmt.Errorf("%q is not a regular expression (%s)", text, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return Target{Pattern: regexp.MustCompile("(?m)" + text)}, nil // Safe: text compiles alone.
}

func parsePortTarget(text, digits string) (Target, error) {
	n, ok := parsePort(digits)
	if !ok {
		return Target{}, fmt.Errorf(`%s is not a port (1 to 65535; a pattern that starts with ':' is written \:)`, text)
	}
	return Target{Port: n}, nil
}

func parseURL(text string) (Target, error) {
	u, err := url.Parse(text)
	if err != nil || u.Host == "" {
		return Target{}, fmt.Errorf("%q is not a URL", text)
	}
	if strings.HasSuffix(u.Host, ":") {
		return Target{}, fmt.Errorf("%q is not a URL: its port is empty", text)
	}
	if p := u.Port(); p != "" {
		if _, ok := parsePort(p); !ok {
			return Target{}, fmt.Errorf("%q is not a URL: its port %s is not 1 to 65535", text, p)
		}
	}
	return Target{URL: text}, nil
}

// parsePort reads a port: decimal digits only, 1 to 65535.
func parsePort(digits string) (int, bool) {
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return n, true
}

// Ready is a service's ready condition: the command of exec:CMD, or else
// a Target.
type Ready struct {
	Exec string // the command of exec:CMD, ready once it exits 0; "" for a Target
	Target
}

// ParseReady reads a service's ready key: exec:CMD, whose CMD has more
// than blanks, or what Parse reads.
func ParseReady(text string) (Ready, error) {
	if line, ok := strings.CutPrefix(text, "exec:"); ok {
		if strings.TrimSpace(line) == "" {
			return Ready{}, errors.New("exec: needs a command")
		}
		return Ready{Exec: line}, nil
	}
	t, err := Parse(text)
	return Ready{Target: t}, err
}
