package acptest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var long = strings.Repeat("QUJD", 100) // longer than elideMin

// scanSeeds are lines that exercise string elision and member splitting.
var scanSeeds = []string{
	`{}`,
	` { "a" : 1 , "b":[1,{"c":"d"}], "e" : {"f":[]} ,"g":null,"h":true,"i":-1.5e3 } `,
	`{"data":"` + long + `"}`,
	`{"` + long + `":"` + long + `","x":["` + long + `","` + long + `"]}`,
	`{"a":"` + long + `\"` + long + `","b":"` + long + `\\","c":"x\\\"y"}`,
	`{"a":"` + long + `\n","b":["` + long + `" , "` + long + `" ]}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"terminal_output_chunk","terminalId":"t","data":"` + long + `"}}}`,
	`{"a":"\u0000acptest:0","b":"` + long + `"}`,
	`[1,"` + long + `"]`,
	`"` + long + `"`,
	`{"a":"` + long,
	`{"a":1}{"b":2}`,
	`{"a":"` + long + `" "b"}`,
	`{"a":"` + long + "\x00" + `"}`,
	`{"a":"` + long + "\xff" + `","b":"` + long + "é" + `"}`,
}

// checkDecodeLine compares decodeLine with a plain decode of line.
func checkDecodeLine(t *testing.T, line []byte) {
	wantTree, wantErr := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	d, err := decodeLine(line)
	tree, fields := d.tree, d.fields
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, want %v", line, err, wantErr)
	}
	if err != nil {
		return
	}
	if !reflect.DeepEqual(tree, wantTree) && !bytes.Contains(line, []byte(`\u0000acptest:`)) {
		t.Fatalf("%q: tree %#v, want %#v", line, tree, wantTree)
	}
	obj, ok := wantTree.(map[string]any)
	if !ok {
		if fields != nil {
			t.Fatalf("%q: fields for a non-object", line)
		}
		return
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(line, &want); err != nil {
		t.Fatal(err)
	}
	if len(fields) != len(obj) {
		t.Fatalf("%q: %d fields, want %d", line, len(fields), len(obj))
	}
	for k, w := range want {
		if !bytes.Equal(fields[k], w) {
			t.Fatalf("%q: field %q = %q, want %q", line, k, fields[k], w)
		}
	}
}

func TestDecodeLine(t *testing.T) {
	for _, s := range scanSeeds {
		checkDecodeLine(t, []byte(s))
	}
}

func FuzzDecodeLine(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecodeLine(t, line)
	})
}

func TestElideLeavesShortLinesAlone(t *testing.T) {
	line := []byte(`{"a":"short"}`)
	if out, long := elide(line); &out[0] != &line[0] || long != nil {
		t.Errorf("elide copied a line with nothing to elide")
	}
}
