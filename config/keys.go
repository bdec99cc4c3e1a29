package config

// This file lists the keys a configuration file may hold, read from the
// types' mapstructure tags (what the loader decodes), so that the list and
// the loader cannot disagree.

import (
	"reflect"
	"sort"
	"strings"
	"time"
)

// Keys lists every key a file decoded into a value of v's type accepts, as
// dotted paths, a list's items written []: "modules[].container.image".
// A map whose keys the operator chooses (foundation.ports) is one key, and
// so is a list of scalars. Keys(Config{}) is the node's file, Keys(Fleet{})
// a fleet file's.
func Keys(v any) []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeOf(time.Duration(0)) {
			out = append(out, prefix)
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if name == "-" || name == "" || !f.IsExported() {
				continue
			}
			key := name
			if prefix != "" {
				key = prefix + "." + name
			}
			ft := f.Type
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				walk(ft.Elem(), key+"[]")
				continue
			}
			walk(ft, key)
		}
	}
	walk(reflect.TypeOf(v), "")
	sort.Strings(out)
	return out
}
