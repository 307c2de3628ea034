// Package words reads the words of a slash command's arguments, quoted
// as a POSIX shell quotes them, and quotes a word for a shell (the paths
// of a prompt's resource links), for package supervisor.
//
// What it guarantees: a word that Quote wrote reads back with Next as it
// was, and a POSIX shell reads it as one argument, unchanged; Next keeps
// a backslash before anything but a quote, a blank or a backslash, since
// the words carry regular expressions; a quote left open is an error.
package words

import (
	"errors"
	"strings"
)

// Word is one word of a slash command's arguments.
type Word struct {
	Text   string
	Quoted bool // some of it was in quotes: it is never an option
}

// Next cuts the first word off s and returns it and what follows it,
// blanks removed. Words are separated by blanks and quoted as a POSIX
// shell quotes them: '…' keeps everything as it is, and "…" keeps
// everything but a backslash before ", \, $ or `, which quotes that
// character. Outside quotes a backslash quotes a quote, a blank or a
// backslash, and is kept as written before anything else, since the
// words carry regular expressions (\d+ means \d+). So a word that
// Quote wrote (a resource link's path) reads back as it was. ok is
// false when s holds no word.
func Next(s string) (w Word, rest string, ok bool, err error) {
	s = strings.TrimLeft(s, " \t")
	if s == "" {
		return Word{}, "", false, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t':
			return Word{b.String(), w.Quoted}, strings.TrimLeft(s[i:], " \t"), true, nil
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return Word{}, "", false, errors.New("a ' quote is not closed")
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 1
			w.Quoted = true
		case '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
			if i == len(s) {
				return Word{}, "", false, errors.New(`a " quote is not closed`)
			}
			w.Quoted = true
		case '\\':
			if i+1 < len(s) && strings.IndexByte("'\" \t\\", s[i+1]) >= 0 {
				i++
				w.Quoted = true
			}
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	return Word{b.String(), w.Quoted}, "", true, nil
}

// Split splits s into words, as Next reads them.
func Split(s string) ([]Word, error) {
	var out []Word
	for {
		w, rest, ok, err := Next(s)
		if err != nil || !ok {
			return out, err
		}
		out = append(out, w)
		s = rest
	}
}

// Quote quotes s for a POSIX shell: as it is if it holds nothing a shell
// reads otherwise, else in single quotes.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
