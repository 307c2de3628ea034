package stack

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// wide is a stack beside the chain: a cache that api also needs, a
// worker on db, and docs that stand alone.
const wide = chain + `
[services.cache]
command = "redis-server"

[services.worker]
command = "worker"
depends_on = ["db", "cache"]

[services.docs]
command = "mkdocs serve"
`

func TestUpDown(t *testing.T) {
	t.Parallel()
	chainStack, err := Load(project(t, map[string]string{TOMLFile: chain}))
	if err != nil {
		t.Fatal(err)
	}
	wideStack, err := Load(project(t, map[string]string{TOMLFile: wide}))
	if err != nil {
		t.Fatal(err)
	}
	// What a session runs after edits of its file: x and y each depend on
	// the other (from two versions), z on a service it no longer runs.
	mixed := Of("shellagent.toml", []*Service{
		{Name: "x", DependsOn: []string{"y"}}, {Name: "y", DependsOn: []string{"x"}},
		{Name: "z", DependsOn: []string{"gone"}}, {Name: "w", DependsOn: []string{"z"}},
	})
	// c depends on a cycle that comes after it in file order.
	downstream := Of("shellagent.toml", []*Service{
		{Name: "c", DependsOn: []string{"a"}}, {Name: "a", DependsOn: []string{"b"}}, {Name: "b", DependsOn: []string{"a"}},
	})
	for _, tc := range []struct {
		name  string
		st    *Stack
		op    func(*Stack, ...string) ([]string, error)
		args  []string
		want  []string
		error string
	}{
		{"up all of a chain", chainStack, (*Stack).Up, nil, []string{"db", "api", "web"}, ""},
		{"up the front takes its dependencies", chainStack, (*Stack).Up, []string{"web"}, []string{"db", "api", "web"}, ""},
		{"up the middle", chainStack, (*Stack).Up, []string{"api"}, []string{"db", "api"}, ""},
		{"up the bottom", chainStack, (*Stack).Up, []string{"db"}, []string{"db"}, ""},
		{"up a name twice", chainStack, (*Stack).Up, []string{"api", "db", "api"}, []string{"db", "api"}, ""},
		{"down all of a chain", chainStack, (*Stack).Down, nil, []string{"web", "api", "db"}, ""},
		{"down the bottom takes its dependents", chainStack, (*Stack).Down, []string{"db"}, []string{"web", "api", "db"}, ""},
		{"down the middle", chainStack, (*Stack).Down, []string{"api"}, []string{"web", "api"}, ""},
		{"down the front", chainStack, (*Stack).Down, []string{"web"}, []string{"web"}, ""},
		{"up all, ties by the file's order", wideStack, (*Stack).Up, nil,
			[]string{"db", "api", "web", "cache", "worker", "docs"}, ""},
		{"up the worker", wideStack, (*Stack).Up, []string{"worker"}, []string{"db", "cache", "worker"}, ""},
		{"down db", wideStack, (*Stack).Down, []string{"db"}, []string{"worker", "web", "api", "db"}, ""},
		{"down cache", wideStack, (*Stack).Down, []string{"cache"}, []string{"worker", "cache"}, ""},
		{"down all", wideStack, (*Stack).Down, nil, []string{"docs", "worker", "cache", "web", "api", "db"}, ""},
		{"running: up all, the cycle last", mixed, (*Stack).Up, nil, []string{"z", "w", "x", "y"}, ""},
		{"running: down all, the cycle first", mixed, (*Stack).Down, nil, []string{"y", "x", "w", "z"}, ""},
		{"running: up all, what depends on a cycle after it", downstream, (*Stack).Up, nil, []string{"a", "c", "b"}, ""},
		{"running: down all, what depends on a cycle before it", downstream, (*Stack).Down, nil, []string{"b", "c", "a"}, ""},
		{"running: down a", downstream, (*Stack).Down, []string{"a"}, []string{"b", "c", "a"}, ""},
		{"running: down z", mixed, (*Stack).Down, []string{"z"}, []string{"w", "z"}, ""},
		{"running: down x", mixed, (*Stack).Down, []string{"x"}, []string{"y", "x"}, ""},
		{"up unknown", chainStack, (*Stack).Up, []string{"api", "nope"}, nil, `no service "nope"`},
		{"down unknown", chainStack, (*Stack).Down, []string{"nope"}, nil, `no service "nope"`},
	} {
		got, err := tc.op(tc.st, tc.args...)
		if tc.error != "" {
			if err == nil || !strings.Contains(err.Error(), tc.error) || got != nil {
				t.Errorf("%s: %v, %v; want nothing and an error with %q", tc.name, got, err, tc.error)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestUpDeterministic: the same file gives the same order every time
// (maps decode in random order; the order must not follow them).
func TestUpDeterministic(t *testing.T) {
	t.Parallel()
	dir := project(t, map[string]string{TOMLFile: wide})
	var first []string
	for i := range 20 {
		st, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := st.Up()
		if i == 0 {
			first = got
		} else if !reflect.DeepEqual(got, first) {
			t.Fatalf("load %d: Up() = %v, load 0 gave %v", i, got, first)
		}
	}
}

// BenchmarkLoadChain loads and orders a stack file of 5,000 services, each
// depending on the next: finding a line, a service or the next to start
// was once a walk from the start each time, and such a file took seconds.
func BenchmarkLoadChain(b *testing.B) {
	const n = 5000
	var file strings.Builder
	for i := range n {
		fmt.Fprintf(&file, "[services.s%d]\ncommand = \"x\"\ndepends_on = [\"s%d\"]\n", i, i+1)
	}
	fmt.Fprintf(&file, "[services.s%d]\ncommand = \"x\"\n", n)
	dir := project(b, map[string]string{TOMLFile: file.String()})
	for b.Loop() {
		st, err := Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		up, err := st.Up()
		if err != nil || len(up) != n+1 || up[0] != fmt.Sprintf("s%d", n) || up[n] != "s0" {
			b.Fatalf("Up: %d services, from %v to %v, %v", len(up), up[0], up[len(up)-1], err)
		}
		if down, err := st.Down("s" + strconv.Itoa(n)); err != nil || len(down) != n+1 || down[0] != "s0" {
			b.Fatalf("Down: %d services, %v", len(down), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/(n+1), "µs/service")
}
