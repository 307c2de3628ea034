package stack

import (
	"container/heap"
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
	dependents := st.dependents()
	want, err := st.closure("down", names, func(s *Service) []string { return dependents[s.Name] })
	if err != nil {
		return nil, err
	}
	order := st.topo(want)
	slices.Reverse(order)
	return order, nil
}

// dependents maps each service to the services that name it in
// depends_on, in file order.
func (st *Stack) dependents() map[string][]string {
	out := make(map[string][]string)
	for _, o := range st.Services {
		for _, d := range o.DependsOn {
			out[d] = append(out[d], o.Name)
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
// placed. Load refuses cycles; in a stack Of services that depend on each
// other in a cycle, the cycle is broken at one of its members (breakAt)
// when nothing else can be placed, so that what depends on the cycle
// still comes after it. It takes time in proportion to the services and
// their dependencies (and a logarithm), so that a stack file of many
// services orders at once.
func (st *Stack) topo(want map[string]bool) []string {
	waiting := make(map[string]int, len(want))    // dependencies not yet placed
	after := make(map[string][]string, len(want)) // dependents within want
	var ready fileOrder
	for i, s := range st.Services {
		if !want[s.Name] {
			continue
		}
		for _, d := range s.DependsOn {
			if want[d] {
				waiting[s.Name]++
				after[d] = append(after[d], s.Name)
			}
		}
		if waiting[s.Name] == 0 {
			ready = append(ready, i) // in file order: a heap already
		}
	}
	order := make([]string, 0, len(want))
	for len(order) < len(want) {
		if ready.Len() == 0 {
			name := st.breakAt(want, waiting)
			waiting[name] = 0
			heap.Push(&ready, st.index[name])
		}
		name := st.Services[heap.Pop(&ready).(int)].Name
		order = append(order, name)
		for _, o := range after[name] {
			if waiting[o] > 0 { // 0: placed already, its cycle broken there
				if waiting[o]--; waiting[o] == 0 {
					heap.Push(&ready, st.index[o])
				}
			}
		}
	}
	return order
}

// breakAt returns a member of a cycle among the services of want that
// still wait: from the first of them in file order, it follows each one's
// first dependency that waits until it comes back to one it has seen.
func (st *Stack) breakAt(want map[string]bool, waiting map[string]int) string {
	var name string
	for _, s := range st.Services {
		if want[s.Name] && waiting[s.Name] > 0 {
			name = s.Name
			break
		}
	}
	seen := map[string]bool{}
	for !seen[name] {
		seen[name] = true
		for _, d := range st.Service(name).DependsOn {
			if want[d] && waiting[d] > 0 {
				name = d
				break
			}
		}
	}
	return name
}

// fileOrder is a heap of indexes of Stack.Services, the smallest first.
type fileOrder []int

func (h fileOrder) Len() int           { return len(h) }
func (h fileOrder) Less(i, j int) bool { return h[i] < h[j] }
func (h fileOrder) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *fileOrder) Push(x any)        { *h = append(*h, x.(int)) }
func (h *fileOrder) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Of returns the stack of services, in that order, for the order Up and
// Down give: the services a session runs, each with the definition it
// runs with, which may come from several versions of file. A dependency
// that is not among them is left out of the order, and services that a
// mix of versions makes depend on each other in a cycle come last.
func Of(file string, services []*Service) *Stack {
	st := &Stack{File: file}
	for _, s := range services {
		st.add(s)
	}
	return st
}
