package acp

import "fmt"

// Merge applies the patch src to dst, both of the same type: the fields
// src sets replace those of dst. Only tool call and terminal updates are
// patches; a message, a state_update or a notice is whole, and is never
// merged.
func Merge(dst, src Update) {
	switch d := dst.(type) {
	case *ToolCallUpdate:
		s := src.(*ToolCallUpdate)
		setIfGiven(&d.Title, s.Title)
		setIfGiven(&d.Kind, s.Kind)
		setIfGiven(&d.Status, s.Status)
		if s.Content != nil {
			d.Content = s.Content
		}
		if s.RawInput != nil {
			d.RawInput = s.RawInput
		}
		if s.RawOutput != nil {
			d.RawOutput = s.RawOutput
		}
		if s.Capabilities != nil {
			d.Capabilities = s.Capabilities
		}
	case *TerminalUpdate:
		s := src.(*TerminalUpdate)
		setIfGiven(&d.Command, s.Command)
		setIfGiven(&d.Cwd, s.Cwd)
		if s.Size != nil {
			d.Size = s.Size
		}
		if s.ExitStatus != nil {
			d.ExitStatus = s.ExitStatus
		}
		if s.Capabilities != nil {
			d.Capabilities = s.Capabilities
		}
	default:
		panic(fmt.Sprintf("acp.Merge: %T is not a patch", dst))
	}
}

// setIfGiven sets *dst to v unless v is empty.
func setIfGiven(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}
