package v1front

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutIncomplete(t *testing.T) {
	tests := []struct {
		in, complete, rest string
	}{
		{"", "", ""},
		{"abc", "abc", ""},
		{"a\xc3", "a", "\xc3"},
		{"a\xc3\xa9", "a\xc3\xa9", ""},
		{"\xe6", "", "\xe6"},
		{"x\xe6\xbc", "x", "\xe6\xbc"},
		{"\xf0\x9f\x98", "", "\xf0\x9f\x98"},
		{"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", ""},
		{"a\xff", "a\xff", ""},               // never valid: not carried
		{"a\xe0\x80", "a\xe0\x80", ""},       // E0 80 can never be completed
		{"a\xed\xa0", "a\xed\xa0", ""},       // a surrogate's start
		{"\x80\x80\x80", "\x80\x80\x80", ""}, // continuations without a lead
		{"é\xf0\x9f", "é", "\xf0\x9f"},       // after a complete character
		{"\xf4\x90", "\xf4\x90", ""},         // beyond U+10FFFF
		{"\xc3\xa9\xe6\xbc", "\xc3\xa9", "\xe6\xbc"},
	}
	for _, tt := range tests {
		c, r := cutIncomplete([]byte(tt.in))
		if string(c) != tt.complete || string(r) != tt.rest {
			t.Errorf("cutIncomplete(%q) = %q, %q; want %q, %q", tt.in, c, r, tt.complete, tt.rest)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	tests := []struct {
		in, want string // want: the decoded string
	}{
		{"plain", "plain"},
		{"q\"b\\s\n\r\t\x1b[31m\x00\x7f", "q\"b\\s\n\r\t\x1b[31m\x00\x7f"},
		{"é漢😀", "é漢😀"},
		{"\u2028\u2029", "\u2028\u2029"},
		// Each maximal ill-formed subpart is one U+FFFD.
		{"a\xffb", "a\ufffdb"},
		{"a\xe6\x97b", "a\ufffdb"},
		{"\xf0\x9f\x98x", "\ufffdx"},
		{"\xe0\x80\x80", "\ufffd\ufffd\ufffd"}, // E0 80 is never valid: 3 subparts
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"}, // a surrogate
		{"\xc0\xaf", "\ufffd\ufffd"},           // overlong
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"\x80é", "\ufffdé"},
	}
	for _, tt := range tests {
		b := appendJSONString([]byte("x"), []byte(tt.in))
		var got string
		if err := json.Unmarshal(b[1:], &got); err != nil || got != tt.want || b[0] != 'x' {
			t.Errorf("appendJSONString(%q) = %s (%v), decodes to %q, want %q", tt.in, b, err, got, tt.want)
		}
	}
}

func TestTailText(t *testing.T) {
	if got := tailText(nil, 0); got != "No output." {
		t.Errorf("no output: %q", got)
	}
	if got, want := tailText([]byte("hi\r\n"), 4), "Output (4 bytes, escape sequences removed):\n```\nhi\n```"; got != want {
		t.Errorf("short: %q, want %q", got, want)
	}
	if got := tailText([]byte("```go\r\n"), 7); !strings.HasPrefix(got, "Output (7 bytes, escape sequences removed):\n````\n```go\n````") {
		t.Errorf("fence: %q", got)
	}
	var long strings.Builder
	for i := 0; long.Len() < 3*tailMax; i++ {
		long.WriteString("line é 漢\r\n")
	}
	total := int64(long.Len()) + 1000 // bytes that the tail no longer holds
	got := tailText([]byte(long.String()), total)
	head, body, _ := strings.Cut(got, "\n")
	if head != "Output (the last 4.0 KiB of 13.0 KiB, escape sequences removed):" {
		t.Errorf("head %q", head)
	}
	if !strings.HasPrefix(body, "```\nline é 漢\n") || !utf8.ValidString(body) || len(body) > tailMax+8 {
		t.Errorf("body starts %q (%d bytes)", body[:min(len(body), 40)], len(body))
	}
}
