package scenario

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTable: every scenario has a unique name that /scenario takes, says
// what it sends, quotes its rule with its source and what a conforming
// client does, and plays something.
func TestTable(t *testing.T) {
	name := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, sc := range All {
		switch {
		case !name.MatchString(sc.Name) || seen[sc.Name]:
			t.Errorf("scenario name %q: not unique or not lower-case words and dashes", sc.Name)
		case sc.Sends == "" || sc.Rule == "" || sc.Source == "" || sc.Expect == "" || sc.Play == nil:
			t.Errorf("scenario %s lacks a field", sc.Name)
		case Lookup(sc.Name).Play == nil || Lookup(sc.Name).Name != sc.Name:
			t.Errorf("Lookup(%q) finds another scenario", sc.Name)
		}
		seen[sc.Name] = true
		intro := sc.Intro()
		for _, part := range []string{sc.Name, sc.Rule, sc.Source, sc.Expect} {
			if !strings.Contains(intro, part) {
				t.Errorf("%s: the intro does not say %q", sc.Name, part)
			}
		}
		if sc.Invalid != strings.Contains(intro, "--scenarios-invalid") {
			t.Errorf("%s: the intro must say it sends an invalid message exactly when it does", sc.Name)
		}
	}
	if Lookup("nosuch") != nil {
		t.Error("Lookup found a scenario that does not exist")
	}
	list := Listing(true, false)
	for _, sc := range All {
		if !strings.Contains(list, "- "+sc.Name+": ") {
			t.Errorf("the listing does not name %s", sc.Name)
		}
	}
	if !strings.Contains(list, "(v2 only)") || !strings.Contains(list, "(needs --scenarios-invalid") {
		t.Errorf("a v1 listing without --scenarios-invalid does not say what will not play:\n%s", list)
	}
}

// TestChecklist: docs/client-checklist.md has a row for every scenario,
// quoting its rule, and the transcripts it points to exist.
func TestChecklist(t *testing.T) {
	doc, err := os.ReadFile("../docs/client-checklist.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, sc := range All {
		if !strings.Contains(text, "`/scenario "+sc.Name+"`") || !strings.Contains(text, sc.Rule) {
			t.Errorf("docs/client-checklist.md has no row for %s that quotes its rule", sc.Name)
		}
	}
	for _, m := range regexp.MustCompile(`\]\((\.\./testdata/transcripts/[^)]+)\)`).FindAllStringSubmatch(text, -1) {
		if _, err := os.Stat(filepath.Join("../docs", m[1])); err != nil {
			t.Errorf("docs/client-checklist.md points to %s: %v", m[1], err)
		}
	}
}
