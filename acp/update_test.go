package acp

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestVariantsListsEveryUpdate checks that Variants, which the tests of
// every switch over updates use, names each type that implements Update.
func TestVariantsListsEveryUpdate(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var implementers []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "isUpdate" {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				t.Errorf("isUpdate on a non-pointer receiver: updates are sent as pointers")
				continue
			}
			implementers = append(implementers, "*acp."+star.X.(*ast.Ident).Name)
		}
	}
	var listed []string
	for _, u := range Variants() {
		listed = append(listed, fmt.Sprintf("%T", u))
	}
	slices.Sort(implementers)
	slices.Sort(listed)
	if !slices.Equal(implementers, listed) {
		t.Errorf("Variants() = %v, but the types with isUpdate are %v", listed, implementers)
	}
}

// TestStateUpdateJSON: the list is always sent, [] when empty.
func TestStateUpdateJSON(t *testing.T) {
	for _, tc := range []struct {
		u    StateUpdate
		want string
	}{
		{StateUpdate{SessionUpdate: KindState, State: StateIdle}, `{"sessionUpdate":"state_update","state":"idle","background":[]}`},
		{StateUpdate{SessionUpdate: KindState, State: StateIdle, StopReason: StopError, Error: &Error{Code: -32603, Message: "x"}},
			`{"sessionUpdate":"state_update","state":"idle","stopReason":"error","background":[],"error":{"code":-32603,"message":"x"}}`},
		{StateUpdate{SessionUpdate: KindState, State: StateRunning, Background: Background{{Type: "terminal", TerminalID: "term_1"}}, Meta: map[string]any{"k": 1}},
			`{"sessionUpdate":"state_update","state":"running","background":[{"type":"terminal","terminalId":"term_1"}],"_meta":{"k":1}}`},
	} {
		got, err := json.Marshal(&tc.u)
		if err != nil || string(got) != tc.want {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", tc.u, got, err, tc.want)
		}
	}
}
