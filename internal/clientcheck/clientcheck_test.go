package clientcheck

import (
	"os"
	"strings"
	"testing"

	"shellagent/acp"
)

// TestRulesAreDocumented: docs/client-checklist.md has a row for every
// client check, which quotes its rule, and each rule's notice is a
// warning that quotes it.
func TestRulesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/client-checklist.md")
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range rules {
		n := Notice(id, "detail")
		if !strings.Contains(string(doc), "| `"+id+"` |") || !strings.Contains(string(doc), strings.Split(r.quote, " [")[0]) {
			t.Errorf("docs/client-checklist.md has no row for %s quoting %q", id, r.quote)
		}
		if n.Severity != acp.NoticeWarning || !strings.Contains(n.Description, r.quote) || n.Title == noticeTitlePrefix {
			t.Errorf("the notice of %s: %+v", id, n)
		}
	}
}

// TestNotice: a notice says what the client did, then the rule with its
// source, then that the request was answered as usual; its _meta names
// the rule.
func TestNotice(t *testing.T) {
	n := Notice(ResumeCwd, "session/resume of s with cwd /a, not /b")
	want := &acp.Notice{
		SessionUpdate: acp.KindNotice, Severity: acp.NoticeWarning,
		Title: "Client check: session/resume with another working directory",
		Description: "session/resume of s with cwd /a, not /b.\n" +
			"schema ResumeSessionRequest.cwd: \"Clients MUST send the session's working directory.\"\n" +
			"shellagent answered as it always does; this notice is sent because the session's client_checks option is on.",
	}
	if n.SessionUpdate != want.SessionUpdate || n.Severity != want.Severity || n.Title != want.Title || n.Description != want.Description {
		t.Errorf("Notice = %+v\nwant %+v", n, want)
	}
	if m, _ := n.Meta["shellagent"].(map[string]any); m["clientCheck"] != ResumeCwd {
		t.Errorf("_meta = %v, want shellagent.clientCheck %s", n.Meta, ResumeCwd)
	}
}

// TestUnsupportedBlock: text and resource links are what shellagent
// takes; the first other block is named.
func TestUnsupportedBlock(t *testing.T) {
	for _, tc := range []struct {
		types []string
		want  string
	}{
		{nil, ""},
		{[]string{"text"}, ""},
		{[]string{"text", "resource_link"}, ""},
		{[]string{"image"}, "image"},
		{[]string{"text", "audio", "resource"}, "audio"},
	} {
		var blocks []acp.ContentBlock
		for _, ty := range tc.types {
			blocks = append(blocks, acp.ContentBlock{Type: ty})
		}
		if got := UnsupportedBlock(blocks); got != tc.want {
			t.Errorf("UnsupportedBlock(%v) = %q, want %q", tc.types, got, tc.want)
		}
	}
}
