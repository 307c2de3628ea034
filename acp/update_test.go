package acp

import (
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
