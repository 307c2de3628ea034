package work

import "testing"

func TestParsers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		parse   func(string) (any, string, bool)
		rest    string
		args    any
		problem string
	}{
		{"none", ParseNone("ps"), "", nil, ""},
		{"none given one", ParseNone("ps"), "-a", nil, "/ps takes no arguments"},
		{"word", ParseWord("needs an id"), "call_2", "call_2", ""},
		{"word missing", ParseWord("needs an id"), "", nil, "needs an id"},
		{"two words", ParseWord("needs an id"), "a b", nil, "needs an id"},
		{"word and a tab", ParseWord("needs an id"), "a\tb", nil, "needs an id"},
		{"rest", ParseRest, "web  db", "web  db", ""},
		{"no rest", ParseRest, "", "", ""},
	}
	for _, tt := range tests {
		args, problem, whole := tt.parse(tt.rest)
		if args != tt.args || problem != tt.problem || whole {
			t.Errorf("%s: parse(%q) = %v, %q, %v; want %v, %q, false", tt.name, tt.rest, args, problem, whole, tt.args, tt.problem)
		}
	}
}
