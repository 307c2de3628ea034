package supervisor

import (
	"errors"
	"strings"
)

// word is one word of a slash command's arguments.
type word struct {
	text   string
	quoted bool // some of it was in quotes: it is never an option
}

// nextWord cuts the first word off s and returns it and what follows it,
// blanks removed. Words are separated by blanks and quoted as a POSIX
// shell quotes them: '…' keeps everything as it is, and "…" keeps
// everything but a backslash before ", \, $ or `, which quotes that
// character. Outside quotes a backslash quotes a quote, a blank or a
// backslash, and is kept as written before anything else, since the
// words carry regular expressions (\d+ means \d+). So a word that
// shellQuote wrote (a resource link's path) reads back as it was. ok is
// false when s holds no word.
func nextWord(s string) (w word, rest string, ok bool, err error) {
	s = strings.TrimLeft(s, " \t")
	if s == "" {
		return word{}, "", false, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t':
			return word{b.String(), w.quoted}, strings.TrimLeft(s[i:], " \t"), true, nil
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return word{}, "", false, errors.New("a ' quote is not closed")
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 1
			w.quoted = true
		case '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
			if i == len(s) {
				return word{}, "", false, errors.New(`a " quote is not closed`)
			}
			w.quoted = true
		case '\\':
			if i+1 < len(s) && strings.IndexByte("'\" \t\\", s[i+1]) >= 0 {
				i++
				w.quoted = true
			}
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	return word{b.String(), w.quoted}, "", true, nil
}

// splitWords splits s into words, as nextWord reads them.
func splitWords(s string) ([]word, error) {
	var out []word
	for {
		w, rest, ok, err := nextWord(s)
		if err != nil || !ok {
			return out, err
		}
		out = append(out, w)
		s = rest
	}
}
