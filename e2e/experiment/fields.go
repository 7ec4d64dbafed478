package experiment

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// unknownFields lists the fields of a YAML document that t has no place
// for, by path ("pods[0].memhog.sise"); the strict decoder names only the
// field.
func unknownFields(data []byte, t reflect.Type) []string {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil
	}
	var out []string
	walkFields(doc, t, "", &out)
	sort.Strings(out)
	return out
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

func walkFields(v any, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return // a value with its own format (durations, quantities)
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := jsonFields(t)
		for k, val := range m {
			ft, ok := fields[k]
			if !ok {
				*out = append(*out, join(path, k))
				continue
			}
			walkFields(val, ft, join(path, k), out)
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for k, val := range m {
				walkFields(val, t.Elem(), join(path, k), out)
			}
		}
	case reflect.Slice:
		if list, ok := v.([]any); ok {
			for i, val := range list {
				walkFields(val, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
			}
		}
	}
}

// jsonFields maps a struct's JSON names to their types, inline fields
// included.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
