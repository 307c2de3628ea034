package acptest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// SchemaEnv names an environment variable that, when set, overrides the
// location of the v2 wire schema file.
const SchemaEnv = "ACPTEST_SCHEMA"

// SchemaV1Env names an environment variable that, when set, overrides the
// location of the v1 wire schema file (see WithProtocolV1).
const SchemaV1Env = "ACPTEST_SCHEMA_V1"

// schemaSpec is what the client validates one protocol version with.
type schemaSpec struct {
	version int
	env     string // overrides rel
	rel     string // the schema's location relative to the module root
	update  string // the definition of session/update params
	// results maps the method of a request the client sends to the schema
	// definition that the result of a successful response must match.
	results map[string]string
	// payloads lists the other definitions that payloads are validated
	// against.
	payloads []string
}

var specs = map[int]*schemaSpec{
	2: {
		version: 2,
		env:     SchemaEnv,
		rel:     filepath.Join("testdata", "acp", "schema.v2.json"),
		update:  "UpdateSessionNotification",
		results: map[string]string{
			"initialize":                "InitializeResponse",
			"session/new":               "NewSessionResponse",
			"session/list":              "ListSessionsResponse",
			"session/resume":            "ResumeSessionResponse",
			"session/close":             "CloseSessionResponse",
			"session/prompt":            "PromptResponse",
			"terminal/cancel":           "CancelTerminalResponse",
			"tool_call/cancel":          "CancelToolCallResponse",
			"session/set_config_option": "SetSessionConfigOptionResponse",
		},
		payloads: []string{"UpdateSessionNotification", "RequestPermissionRequest", "CancelRequestNotification", "Error"},
	},
	1: {
		version: 1,
		env:     SchemaV1Env,
		rel:     filepath.Join("testdata", "acp", "schema.v1.json"),
		update:  "SessionNotification",
		results: map[string]string{
			"initialize":                "InitializeResponse",
			"session/new":               "NewSessionResponse",
			"session/list":              "ListSessionsResponse",
			"session/resume":            "ResumeSessionResponse",
			"session/load":              "LoadSessionResponse",
			"session/close":             "CloseSessionResponse",
			"session/prompt":            "PromptResponse",
			"session/set_config_option": "SetSessionConfigOptionResponse",
		},
		payloads: []string{"SessionNotification", "RequestPermissionRequest", "CancelRequestNotification", "Error"},
	},
}

// schemaSet is the compiled wire schema of a protocol version: the root
// and the definitions that specific payloads are checked against.
type schemaSet struct {
	spec *schemaSpec
	root *jsonschema.Schema
	defs map[string]*jsonschema.Schema

	// stringFree is true when no schema keyword looks at a string's
	// contents beyond const and enum (no pattern, length or uniqueness
	// constraint), so that long strings cannot change a validation result.
	stringFree bool
}

// schemaLoad is the compilation of one version's schema, done once per
// process.
type schemaLoad struct {
	once sync.Once
	set  *schemaSet
	err  error
}

var schemaLoads = map[int]*schemaLoad{1: {}, 2: {}}

// loadSchemas compiles the wire schema of a protocol version once per
// process.
func loadSchemas(version int) (*schemaSet, error) {
	l, spec := schemaLoads[version], specs[version]
	if l == nil {
		return nil, fmt.Errorf("acptest: no schema for ACP v%d", version)
	}
	l.once.Do(func() {
		var path string
		path, l.err = schemaPath(spec)
		if l.err == nil {
			l.set, l.err = compileSchemas(path, spec)
		}
	})
	return l.set, l.err
}

// schemaPath finds a schema file: $env, else ../../rel relative to this
// source file, else the first rel found walking up from the working
// directory (for binaries built with -trimpath).
func schemaPath(spec *schemaSpec) (string, error) {
	if p := os.Getenv(spec.env); p != "" {
		return p, nil
	}
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", "..", spec.rel)
		if fileExists(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if dir, err := os.Getwd(); err == nil {
		for {
			p := filepath.Join(dir, spec.rel)
			if fileExists(p) {
				return p, nil
			}
			tried = append(tried, p)
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("acptest: ACP v%d schema not found (set %s); tried %s", spec.version, spec.env, strings.Join(tried, ", "))
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// compileSchemas compiles the schema root and every definition the client uses.
func compileSchemas(path string, spec *schemaSpec) (*schemaSet, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(f)
	_ = f.Close() // Best effort: read-only, and read already
	if err != nil {
		return nil, fmt.Errorf("acptest: reading %s: %w", abs, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(abs, doc); err != nil {
		return nil, err
	}
	root, err := c.Compile(abs)
	if err != nil {
		return nil, fmt.Errorf("acptest: compiling %s: %w", abs, err)
	}
	set := &schemaSet{spec: spec, root: root, defs: make(map[string]*jsonschema.Schema), stringFree: stringFree(doc)}
	names := append([]string(nil), spec.payloads...)
	for _, def := range spec.results {
		names = append(names, def)
	}
	for _, name := range names {
		sch, err := c.Compile(abs + "#/$defs/" + name)
		if err != nil {
			return nil, fmt.Errorf("acptest: compiling definition %s: %w", name, err)
		}
		set.defs[name] = sch
	}
	return set, nil
}

// stringKeywords are the keywords that constrain string contents other
// than by equality.
var stringKeywords = []string{"pattern", "maxLength", "uniqueItems", "contentSchema", "patternProperties", "propertyNames"}

// stringFree reports whether no subschema of the schema s uses a keyword of
// stringKeywords, or a minLength that an elided string could fail. It
// follows the subschema positions of draft 2020-12.
func stringFree(s any) bool {
	obj, ok := s.(map[string]any)
	if !ok {
		return true // a boolean schema
	}
	for _, k := range stringKeywords {
		if _, ok := obj[k]; ok {
			return false
		}
	}
	if v, ok := obj["minLength"]; ok {
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		if min, err := n.Int64(); err != nil || min > elideMin {
			return false
		}
	}
	for k, v := range obj {
		switch k {
		case "$defs", "properties", "dependentSchemas":
			m, _ := v.(map[string]any)
			for _, sub := range m {
				if !stringFree(sub) {
					return false
				}
			}
		case "allOf", "anyOf", "oneOf", "prefixItems":
			l, _ := v.([]any)
			for _, sub := range l {
				if !stringFree(sub) {
					return false
				}
			}
		case "items", "not", "if", "then", "else", "contains", "additionalProperties",
			"unevaluatedItems", "unevaluatedProperties":
			if !stringFree(v) {
				return false
			}
		}
	}
	return true
}

// undeclared returns a problem for each member of the object v, at path
// ("params.toolCall"), that sch does not declare (its properties, and
// those of what it refers to: $ref, allOf). The schema lets an object
// carry members it does not declare, but what an agent adds of its own
// belongs in _meta: a member the definition does not have, such as a
// session update's sessionUpdate in a permission request's toolCall
// (v1's ToolCallUpdate), is the mark of the wrong type sent.
func undeclared(sch *jsonschema.Schema, v any, path string) []string {
	obj, ok := v.(map[string]any)
	if !ok || sch == nil {
		return nil // not an object: the schema says what is wrong
	}
	members := map[string]bool{}
	declare(sch, members)
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !members[k] {
			problems = append(problems, fmt.Sprintf("%s has a member its definition does not declare: %q", path, k))
		}
	}
	return problems
}

// declare adds the members sch declares to members.
func declare(sch *jsonschema.Schema, members map[string]bool) {
	if sch == nil {
		return
	}
	for k := range sch.Properties {
		members[k] = true
	}
	declare(sch.Ref, members)
	for _, s := range sch.AllOf {
		declare(s, members)
	}
}

// validate checks v against the named definition, or against the schema
// root when def is empty. It returns "" when v is valid and a condensed
// description of the failure otherwise.
func (s *schemaSet) validate(def string, v any) string {
	sch := s.root
	if def != "" {
		sch = s.defs[def]
	}
	if err := sch.Validate(v); err != nil {
		return summarize(err)
	}
	return ""
}

// maxCauses bounds how many leaf failures summarize lists.
const maxCauses = 6

// summarize condenses a validation error to its relevant leaf failures. In
// every anyOf it drops the branches whose discriminator did not match (a
// failed const on a direct property, or the failed "not" of an "other"
// branch), so that the failures of the branch the message meant to match
// are shown instead of one failure per variant.
func summarize(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var leaves []*jsonschema.ValidationError
	collectLeaves(ve, &leaves)
	seen := make(map[string]bool)
	var parts []string
	for _, l := range leaves {
		s := l.Error() // a leaf renders as "at '/ptr': message"
		if seen[s] {
			continue
		}
		seen[s] = true
		parts = append(parts, s)
	}
	if len(parts) > maxCauses {
		parts = append(parts[:maxCauses], fmt.Sprintf("(%d more)", len(parts)-maxCauses))
	}
	return strings.Join(parts, "; ")
}

// collectLeaves appends the leaf failures below e, pruning mismatched anyOf
// branches (see summarize).
func collectLeaves(e *jsonschema.ValidationError, out *[]*jsonschema.ValidationError) {
	if len(e.Causes) == 0 {
		*out = append(*out, e)
		return
	}
	causes := e.Causes
	if _, ok := e.ErrorKind.(*kind.AnyOf); ok {
		var kept []*jsonschema.ValidationError
		for _, c := range causes {
			if !discriminatorMismatch(c, len(e.InstanceLocation)) {
				kept = append(kept, c)
			}
		}
		if len(kept) > 0 {
			causes = kept
		}
	}
	for _, c := range causes {
		collectLeaves(c, out)
	}
}

// discriminatorMismatch reports whether the anyOf branch e (validating an
// instance at the given depth) failed on its discriminator. It does not look
// into nested anyOfs, whose discriminators are their own business.
func discriminatorMismatch(e *jsonschema.ValidationError, depth int) bool {
	switch e.ErrorKind.(type) {
	case *kind.Const:
		if len(e.InstanceLocation) == depth+1 {
			return true
		}
	case *kind.Not:
		if len(e.InstanceLocation) == depth {
			return true
		}
	case *kind.AnyOf:
		return false
	}
	for _, c := range e.Causes {
		if discriminatorMismatch(c, depth) {
			return true
		}
	}
	return false
}
