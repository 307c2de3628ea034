package journal

// The lines of a session file as the writer writes them, and the fast
// reading of its output lines (parseOut, the inverse of appendOut).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
)

// appendRecord appends r's line to b.
func appendRecord(b []byte, r *record) []byte {
	j, err := json.Marshal(r)
	if err != nil {
		panic("journal: encoding a record: " + err.Error()) // only RawMessage can fail, and it comes from json.Marshal
	}
	return append(append(b, j...), '\n')
}

// appendOut appends an out record's line to b, without encoding/json's
// copies.
func appendOut(b []byte, at time.Time, term string, d []byte) []byte {
	b = append(b, `{"t":"out","at":"`...)
	b = at.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","term":`...)
	b = strconv.AppendQuote(b, term)
	b = append(b, `,"d":"`...)
	b = base64.StdEncoding.AppendEncode(b, d)
	return append(b, "\"}\n"...)
}

// parseLine reads a line of a session file into rec: an out line as
// appendOut wrote it with parseOut, any other with encoding/json.
func parseLine(line []byte, rec *record) error {
	if parseOut(line, rec) {
		return nil
	}
	return json.Unmarshal(line, rec)
}

// parseOut reads line as appendOut wrote it into rec, without
// encoding/json's passes over the data: rec.D is the quoted base64 in
// line. It reports false, leaving rec alone, for any line that is not
// exactly such a line (then encoding/json reads it).
func parseOut(line []byte, rec *record) bool {
	rest, ok := bytes.CutPrefix(line, []byte(`{"t":"out","at":"`))
	if !ok {
		return false
	}
	at, rest, ok := bytes.Cut(rest, []byte(`","term":"`))
	if !ok {
		return false
	}
	term, rest, ok := bytes.Cut(rest, []byte(`","d":`))
	if !ok || bytes.IndexByte(term, '\\') >= 0 {
		return false
	}
	d, ok := bytes.CutSuffix(rest, []byte("}\n"))
	// Two IndexByte scans: ContainsAny's set lookup was half of a
	// compaction's time.
	if !ok || len(d) < 2 || d[0] != '"' || d[len(d)-1] != '"' || bytes.IndexByte(d[1:len(d)-1], '"') >= 0 || bytes.IndexByte(d[1:len(d)-1], '\\') >= 0 {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, string(at))
	if err != nil {
		return false
	}
	*rec = record{T: "out", At: t, Term: string(term), D: d}
	return true
}
