package protocol

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"shellagent/acp"
)

// exactNames checks that raw, the JSON that was decoded into a value of
// type t, spells each member that names a field of t as the field's JSON
// name does, at every depth. encoding/json matches member names without
// regard to case, so a client that sends sessionID for sessionId would
// work with shellagent and with no agent that holds to the schema, whose
// names are case-sensitive: shellagent is the agent client developers test
// against, so it refuses that (-32602, naming the member and the name
// meant). Members that name no field are left alone, as encoding/json
// leaves them. Where raw does not have the shape of t the decoder has
// said so already, or the request's validation will.
func exactNames(raw json.RawMessage, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if ft, ok := fields[k]; ok {
				if err := exactNames(m[k], ft, member(path, k)); err != nil {
					return err
				}
				continue
			}
			for name := range fields { // at most one name matches k but for case
				if strings.EqualFold(k, name) {
					return acp.InvalidParams("%s: unknown member (names are case-sensitive: did you mean %q?)", member(path, k), name)
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // bytes: base64, or raw JSON
		}
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil {
			return nil
		}
		for i, e := range a {
			if err := exactNames(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if t.Key().Kind() != reflect.String || json.Unmarshal(raw, &m) != nil {
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := exactNames(m[k], t.Elem(), member(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// member is the path of member k of the value at path.
func member(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// fieldCache holds jsonFields' answers, by type.
var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields returns the JSON names of struct type t's fields, as
// encoding/json names them (the tag's name, else the field's), with each
// field's type. Embedded structs, which no params type has, are left out:
// their members are left alone.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := make(map[string]reflect.Type)
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if !f.IsExported() || f.Anonymous || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	fieldCache.Store(t, fields)
	return fields
}
