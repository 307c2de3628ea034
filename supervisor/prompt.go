package supervisor

import (
	"fmt"
	"net/url"
	"strings"

	"shellagent/acp"
	"shellagent/internal/words"
)

// promptLine joins a prompt's blocks into one input line: text blocks as
// they are, resource links as their shell-quoted path (file: URIs) or URI,
// separated by spaces. Other block types are refused with -32602, as the
// schema requires for unsupported content.
func promptLine(blocks []acp.ContentBlock) (string, error) {
	parts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "resource_link":
			if b.URI == "" {
				return "", acp.InvalidParams("prompt[%d].uri: required", i)
			}
			path, err := linkPath(b.URI)
			if err != nil {
				return "", acp.InvalidParams("prompt[%d].uri: %v", i, err)
			}
			parts = append(parts, words.Quote(path))
		default:
			return "", acp.InvalidParams("prompt[%d].type: %q is not supported (shellagent takes text and resource_link blocks)", i, b.Type)
		}
	}
	line := strings.TrimSpace(strings.Join(parts, " "))
	if line == "" {
		return "", acp.InvalidParams("prompt: empty; send a command line")
	}
	return line, nil
}

// linkPath is what a resource link contributes to the command line: the
// local path of a file: URI, or the URI itself. A file: URI that names
// another host is refused: its path is not this machine's file.
func linkPath(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return uri, nil
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("%s names the host %q; a file URI must be local (file:///path or file://localhost/path)", uri, u.Host)
	}
	return u.Path, nil
}
