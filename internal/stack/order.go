package stack

import (
	"fmt"
	"slices"
)

// Up returns the services to start for /up NAME…: the named ones (every
// service when none is named) and everything they depend on, each once,
// dependencies first. Among services whose dependencies are all before
// them, the file's order decides, so the order is the same every time. An
// unknown name is refused.
func (st *Stack) Up(names ...string) ([]string, error) {
	want, err := st.closure("up", names, func(s *Service) []string { return s.DependsOn })
	if err != nil {
		return nil, err
	}
	return st.topo(want), nil
}

// Down returns the services to stop for /down NAME…: the named ones
// (every service when none is named) and everything that depends on them,
// each once, in the reverse of the order Up would start them, so that a
// service stops after all its dependents. An unknown name is refused.
func (st *Stack) Down(names ...string) ([]string, error) {
	want, err := st.closure("down", names, st.dependents)
	if err != nil {
		return nil, err
	}
	order := st.topo(want)
	slices.Reverse(order)
	return order, nil
}

// Dependents returns the services that name directly in depends_on, in
// file order.
func (st *Stack) dependents(s *Service) []string {
	var out []string
	for _, o := range st.Services {
		if slices.Contains(o.DependsOn, s.Name) {
			out = append(out, o.Name)
		}
	}
	return out
}

// closure returns the named services (all when names is empty) and all
// that next reaches from them, transitively.
func (st *Stack) closure(op string, names []string, next func(*Service) []string) (map[string]bool, error) {
	want := make(map[string]bool, len(st.Services))
	if len(names) == 0 {
		for _, s := range st.Services {
			want[s.Name] = true
		}
		return want, nil
	}
	stack := make([]string, 0, len(names))
	for _, n := range names {
		if st.Service(n) == nil {
			return nil, fmt.Errorf("stack: %s %s: no service %q in %s", op, n, n, st.File)
		}
		stack = append(stack, n)
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if want[n] {
			continue
		}
		want[n] = true
		stack = append(stack, next(st.Service(n))...)
	}
	return want, nil
}

// topo orders the services in want dependencies first: at each step the
// first service in file order whose dependencies (within want) are all
// placed. Load refused cycles, so each step places one.
func (st *Stack) topo(want map[string]bool) []string {
	placed := make(map[string]bool, len(want))
	order := make([]string, 0, len(want))
	for len(order) < len(want) {
		for _, s := range st.Services {
			if !want[s.Name] || placed[s.Name] || !st.depsPlaced(s, want, placed) {
				continue
			}
			placed[s.Name] = true
			order = append(order, s.Name)
			break
		}
	}
	return order
}

func (st *Stack) depsPlaced(s *Service, want, placed map[string]bool) bool {
	for _, d := range s.DependsOn {
		if want[d] && !placed[d] {
			return false
		}
	}
	return true
}
