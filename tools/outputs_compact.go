package tools

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// Output schemas as tools/list shows them. The full schema of a result
// (every nested record with every field) is what the Go type says, but an
// agent choosing and chaining tools needs the result's fields and the
// fields of the records a list gives it, not the inside of each nested
// object: it reads those in the result, and a nested record's fields are
// the ones its own get_ tool names. So the schema served names the
// result's fields and those of the items of the lists directly in it,
// types any other nested object only as an object (a dossier's contact, a
// status's next action), keeps additionalProperties false and required
// only at the top (where the envelope is exact), and moves a record that
// appears more than once into $defs. Every result still validates against
// it: the served schema only loosens the full one (TestToolOutputSchemas
// and the integration test validate real results).

// outputDepth is how many levels of properties the served schema names:
// the result's, and those of the items of its lists.
const outputDepth = 2

// compact is the served form of a full output schema.
func compact(full *jsonschema.Schema, depth int) *jsonschema.Schema {
	s := full.CloneSchemas()
	prune(s, 0, depth, false)
	hoist(s)
	return s
}

// prune cuts s, found depth levels of properties below the result, to
// what the served schema names, at most max levels; listed says s is the
// item of a list, the only nested object whose fields are named.
func prune(s *jsonschema.Schema, depth, max int, listed bool) {
	if s == nil {
		return
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil && len(s.AdditionalProperties.Properties) == 0 && s.AdditionalProperties.Type == "" && len(s.AdditionalProperties.Types) == 0 {
		s.AdditionalProperties = nil // true is the default
	}
	if depth > 0 {
		s.Required = nil
		s.AdditionalProperties = nil
		s.PropertyOrder = nil
	}
	if depth >= max {
		s.Properties = nil
		s.Items = nil
		s.AdditionalProperties = nil
		return
	}
	if depth > 0 && !listed {
		s.Properties = nil
	}
	for _, p := range s.Properties {
		prune(p, depth+1, max, false)
	}
	prune(s.Items, depth, max, true)
	prune(s.AdditionalProperties, depth+1, max, false)
}

// hoist moves every object schema with properties that appears more than
// once in s into s.$defs, named after the first property it was found under.
func hoist(s *jsonschema.Schema) {
	type seen struct {
		name  string
		count int
	}
	found := map[string]*seen{}
	var order []string
	var walk func(x *jsonschema.Schema, name string, top bool)
	walk = func(x *jsonschema.Schema, name string, top bool) {
		if x == nil {
			return
		}
		if !top && len(x.Properties) > 0 {
			b, _ := json.Marshal(x)
			k := string(b)
			if f, ok := found[k]; ok {
				f.count++
			} else {
				found[k] = &seen{name: name, count: 1}
				order = append(order, k)
			}
		}
		for _, n := range sortedKeys(x.Properties) {
			walk(x.Properties[n], n, false)
		}
		walk(x.Items, name, false)
	}
	walk(s, "", true)
	refs := map[string]string{}
	for _, k := range order {
		f := found[k]
		if f.count < 2 {
			continue
		}
		name := f.name
		for i := 2; s.Defs[name] != nil; i++ {
			name = fmt.Sprintf("%s%d", f.name, i)
		}
		var def jsonschema.Schema
		if err := json.Unmarshal([]byte(k), &def); err != nil {
			panic(err)
		}
		if s.Defs == nil {
			s.Defs = map[string]*jsonschema.Schema{}
		}
		s.Defs[name] = &def
		refs[k] = "#/$defs/" + name
	}
	if len(refs) == 0 {
		return
	}
	var replace func(x *jsonschema.Schema)
	replace = func(x *jsonschema.Schema) {
		if x == nil {
			return
		}
		for n, p := range x.Properties {
			if r := refOf(p, refs); r != nil {
				x.Properties[n] = r
				continue
			}
			replace(p)
		}
		if r := refOf(x.Items, refs); r != nil {
			x.Items = r
		} else {
			replace(x.Items)
		}
	}
	replace(s)
}

// refOf is a $ref to x's entry in $defs, or nil when x has none. The type
// stays beside the $ref where it allows null, as the reference's does not.
func refOf(x *jsonschema.Schema, refs map[string]string) *jsonschema.Schema {
	if x == nil || len(x.Properties) == 0 {
		return nil
	}
	b, _ := json.Marshal(x)
	if r, ok := refs[string(b)]; ok {
		return &jsonschema.Schema{Ref: r}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// written is the served schema of a tool that writes and answers with the
// record it wrote: the record's id and the fields that say where it stands
// (stage, status, archived_at, updated_at) where it has them; the record's
// other fields are those its get_ and list_ tools show. The server's
// instructions say so once, rather than a description on every such schema.
func written(full *jsonschema.Schema) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
	for _, name := range []string{"id", "stage", "status", "updated_at", "archived_at"} {
		if p := full.Properties[name]; p != nil {
			c := p.CloneSchemas()
			prune(c, 1, 1, false)
			s.Properties[name] = c
			if slices.Contains(full.Required, name) {
				s.Required = append(s.Required, name)
			}
		}
	}
	return s
}
