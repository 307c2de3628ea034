package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxMethods is the most methods a non-test type of the module may have,
// counting those promoted from embedded types of its own package.
const maxMethods = 25

// methodExceptions names the types still allowed over maxMethods, as
// "package/path.Type", each with the reason. Shrink it; do not grow it.
var methodExceptions = map[string]string{}

// TestNoTypeOverMethodLimit: no non-test type of the module has more than
// maxMethods methods, counting the methods promoted from embedded types of
// its own package, except those methodExceptions names (whose count must
// still be over the limit, so that a fixed type leaves the list).
func TestNoTypeOverMethodLimit(t *testing.T) {
	t.Parallel()
	pkgs, err := modulePackages(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		counts, err := methodCounts(filepath.Join(moduleRoot, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		for typ, n := range counts {
			name := p + "." + typ
			seen[name] = true
			_, excused := methodExceptions[name]
			switch {
			case n > maxMethods && !excused:
				t.Errorf("%s has %d methods, over %d", name, n, maxMethods)
			case n <= maxMethods && excused:
				t.Errorf("%s has %d methods, within %d: take it off methodExceptions", name, n, maxMethods)
			}
		}
	}
	for name := range methodExceptions {
		if !seen[name] {
			t.Errorf("methodExceptions names %s, which is no type of the module", name)
		}
	}
}

// methodCounts parses the non-test Go files of dir and returns, for each
// type declared there, how many distinct methods it has: those declared on
// it and those promoted from the types of the same package it embeds. A
// method declared in files for different systems counts once.
func methodCounts(dir string) (map[string]int, error) {
	fset := token.NewFileSet()
	declared := map[string][]string{} // type -> method names
	embeds := map[string][]string{}   // struct type -> embedded type names
	var types []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 {
					if r := typeName(d.Recv.List[0].Type); r != "" {
						declared[r] = append(declared[r], d.Name.Name)
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok {
						continue
					}
					types = append(types, ts.Name.Name)
					switch st := ts.Type.(type) {
					case *ast.StructType:
						for _, fl := range st.Fields.List {
							if len(fl.Names) == 0 {
								if n := typeName(fl.Type); n != "" {
									embeds[ts.Name.Name] = append(embeds[ts.Name.Name], n)
								}
							}
						}
					case *ast.InterfaceType:
						for _, m := range st.Methods.List {
							for _, n := range m.Names {
								declared[ts.Name.Name] = append(declared[ts.Name.Name], n.Name)
							}
							if len(m.Names) == 0 {
								if n := typeName(m.Type); n != "" {
									embeds[ts.Name.Name] = append(embeds[ts.Name.Name], n)
								}
							}
						}
					}
				}
			}
		}
	}
	var methodSet func(typ string, set map[string]bool, visiting []string)
	methodSet = func(typ string, set map[string]bool, visiting []string) {
		if slices.Contains(visiting, typ) {
			return
		}
		for _, m := range declared[typ] {
			set[m] = true
		}
		for _, e := range embeds[typ] {
			methodSet(e, set, append(visiting, typ))
		}
	}
	counts := map[string]int{}
	for _, typ := range types {
		set := map[string]bool{}
		methodSet(typ, set, nil)
		counts[typ] = len(set)
	}
	return counts, nil
}

// typeName returns the name of the package-local type expr names, through
// a pointer and type arguments, or "" for anything else (a type of another
// package, a literal).
func typeName(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	case *ast.ParenExpr:
		return typeName(e.X)
	}
	return ""
}
