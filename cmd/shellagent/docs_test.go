package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"shellagent/internal/stack"
)

// The module's root, from this package's directory.
const moduleRoot = "../.."

// docsPackageRow is a row of docs/architecture.md's package table: its
// first cell names a package by its path in the module.
var docsPackageRow = regexp.MustCompile("(?m)^\\| `([a-z0-9_/]+)` \\|")

// TestArchitectureNamesEveryPackage: docs/architecture.md's package table
// names every package of the module, and nothing else, so that a package
// added, moved or removed shows in the map.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := markdownSection(string(doc), "## Packages")
	if !ok {
		t.Fatal("docs/architecture.md has no \"## Packages\" section")
	}
	var named []string
	for _, m := range docsPackageRow.FindAllStringSubmatch(section, -1) {
		named = append(named, m[1])
	}
	pkgs, err := modulePackages(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages in the module: %v", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		if !slices.Contains(named, p) {
			t.Errorf("package %s is not in docs/architecture.md's package table", p)
		}
	}
	for _, n := range named {
		if !slices.Contains(pkgs, n) {
			t.Errorf("docs/architecture.md's package table names %s, which is no package of the module", n)
		}
	}
}

// markdownSection returns the text under heading, up to the next heading
// of the same level or above.
func markdownSection(doc, heading string) (string, bool) {
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return "", false
	}
	rest := doc[i+len(heading)+2:]
	level := strings.Repeat("#", strings.Index(heading, " "))
	for j := 0; j < len(rest); {
		line, _, _ := strings.Cut(rest[j:], "\n")
		if n := len(line) - len(strings.TrimLeft(line, "#")); n > 0 && n <= len(level) && strings.HasPrefix(line[n:], " ") {
			return rest[:j], true
		}
		j += len(line) + 1
	}
	return rest, true
}

// mdLink is the target of a markdown link, [text](target); mdHeading a
// heading line; mdFence a fenced code block, whose text is no markdown.
var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#+ (.*)$`)
	mdFence   = regexp.MustCompile("(?s)```.*?```")
)

// TestDocLinksResolve: every relative link in the module's markdown files
// names a file that exists and, with a #fragment, a heading of that file
// (as GitHub makes anchors), so that a document moved or a heading renamed
// shows here instead of in a reader's 404.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	var docs []string
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != moduleRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 10 {
		t.Fatalf("found only %d markdown files: %v", len(docs), docs)
	}
	links := 0
	anchors := map[string][]string{} // by file, read once
	for _, doc := range docs {
		for _, m := range mdLink.FindAllStringSubmatch(markdownText(t, doc), -1) {
			target := m[1]
			if strings.HasPrefix(target, "http:") || strings.HasPrefix(target, "https:") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, frag, _ := strings.Cut(target, "#")
			if file == "" {
				file = doc
			} else {
				file = filepath.Join(filepath.Dir(doc), file)
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s links to %s: %v", doc, target, err)
				continue
			}
			if frag == "" {
				continue
			}
			heads, ok := anchors[file]
			if !ok {
				heads = markdownAnchors(t, file)
				anchors[file] = heads
			}
			if !slices.Contains(heads, frag) {
				t.Errorf("%s links to %s: %s has no heading with that anchor", doc, target, file)
			}
		}
	}
	if links < 50 {
		t.Errorf("found only %d relative links in %d files", links, len(docs))
	}
}

// markdownText reads a markdown file without its fenced code blocks.
func markdownText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return mdFence.ReplaceAllString(string(b), "")
}

// markdownAnchors lists the anchors GitHub gives a markdown file's
// headings: lower case, spaces as hyphens, other punctuation dropped.
// (Repeated headings, which GitHub numbers, are not told apart.)
func markdownAnchors(t *testing.T, path string) []string {
	t.Helper()
	var anchors []string
	for _, m := range mdHeading.FindAllStringSubmatch(markdownText(t, path), -1) {
		anchors = append(anchors, strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(m[1])))
	}
	return anchors
}

// modulePackages lists the directories under root that hold Go files, as
// paths relative to root, skipping what the go command skips: testdata
// and directories whose names start with "." or "_".
func modulePackages(root string) ([]string, error) {
	var pkgs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); !slices.Contains(pkgs, rel) {
			pkgs = append(pkgs, rel)
		}
		return nil
	})
	return pkgs, err
}

// TestReadmeDemo: the README shows what its first command prints
// (demoOutput, which TestClientDemo checks against the real run), in the
// block right after the sentence that promises it.
func TestReadmeDemo(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const intro = "prints the same on every run:\n\n```\n"
	_, after, ok := strings.Cut(string(readme), intro)
	if !ok {
		t.Fatalf("README.md lacks %q", intro)
	}
	shown, _, ok := strings.Cut(after, "```\n")
	if !ok {
		t.Fatal("README.md's demo block does not end")
	}
	if want := demoOutput("/home/you/shellagent"); shown != want {
		t.Errorf("README.md's demo block is\n%s\nbut the demo prints\n%s", shown, want)
	}
}

// helpFlag is a flag as --help lists it.
var helpFlag = regexp.MustCompile(`(?m)^  (?:-h, )?--([a-z][a-z-]*)`)

// TestFlagsAreDocumented: every flag that --help lists for the agent and
// the daemon is in docs/prompts.md, every flag of the client in
// docs/client.md, and every flag of the stack's commands in docs/stacks.md.
func TestFlagsAreDocumented(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		doc  string
	}{
		{[]string{"--help"}, "prompts.md"},
		{[]string{"daemon", "--help"}, "prompts.md"},
		{[]string{"client", "--help"}, "client.md"},
		{[]string{"up", "--help"}, "stacks.md"},
	} {
		help, err := exec.Command(binary, c.args...).Output()
		if err != nil {
			t.Fatalf("shellagent %s: %v", strings.Join(c.args, " "), err)
		}
		doc, err := os.ReadFile(filepath.Join(moduleRoot, "docs", c.doc))
		if err != nil {
			t.Fatal(err)
		}
		flags := helpFlag.FindAllStringSubmatch(string(help), -1)
		if len(flags) < 2 {
			t.Fatalf("shellagent %s lists %d flags:\n%s", strings.Join(c.args, " "), len(flags), help)
		}
		for _, m := range flags {
			named := regexp.MustCompile(`(^|[^-\w])--` + m[1] + `([^-\w]|$)`)
			if m[1] != "help" && !named.Match(doc) {
				t.Errorf("--%s (shellagent %s) is not in docs/%s", m[1], strings.Join(c.args, " "), c.doc)
			}
		}
	}
}

// TestReadmeStackExample: the stack file in README.md's "Run a project's
// dev servers" is one that /up accepts, with its three services in the
// order the text says they start.
func TestReadmeStackExample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := markdownSection(string(readme), "### Run a project's dev servers")
	if !ok {
		t.Fatal(`README.md lacks "### Run a project's dev servers"`)
	}
	_, after, ok := strings.Cut(section, "```toml\n")
	if !ok {
		t.Fatal("the section has no toml block")
	}
	file, _, ok := strings.Cut(after, "```\n")
	if !ok {
		t.Fatal("the toml block does not end")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stack.TOMLFile), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := stack.Load(dir)
	if err != nil {
		t.Fatalf("README.md's stack file is refused: %v", err)
	}
	order, err := s.Up()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"db", "api", "web"}; !slices.Equal(order, want) {
		t.Errorf("/up starts %v, want %v", order, want)
	}
}
