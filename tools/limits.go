package tools

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"

	"outreach/repo"
	"outreach/repo/pipeline"
	"outreach/repo/reports"
	"outreach/repo/search"
)

// Limits of arguments, declared once: newTool writes them into the input
// schema the agent reads (maxLength, maxItems, minimum, maximum; the
// defaults and the rules of a free-form object are said once, in the
// server's instructions), and decode enforces the same figures on every
// call, before the tool's handler runs, so no handler holds a limit of its
// own. A field's `max:"N"` tag overrides the default of its type, and a
// whole number's `min:"N"` gives its least value; N is a figure or the name
// of a limit declared where its store-side check lives (namedLimits). The
// table of limits in docs/limits.md is held to these figures by a test.
const (
	// MaxText is the default length of a string argument, in characters.
	MaxText = 1000
	// MaxLongText is the length of long text (note content, descriptions,
	// bios, summaries, full text), in characters.
	MaxLongText = 100_000
	// MaxURL is the length of a URL argument, in characters.
	MaxURL = 2048
	// MaxItems is the default number of elements of an array argument.
	MaxItems = 100
	// MaxFigure bounds audience figures (reach, audience_size): a trillion,
	// beyond any real audience, and far enough from the int64 limit that
	// sums of them never wrap.
	MaxFigure = repo.MaxFigure
	// maxSlackText is the longest Slack message, in characters (Slack
	// truncates a message's text beyond 4,000).
	maxSlackText = 4000
	// maxSlackOptions is how many suggested answers a question lists.
	maxSlackOptions = 10
	// maxAgendaDays is the widest of get_agenda's windows.
	maxAgendaDays = 365
	// maxInteractions is how many latest interactions a dossier shows at most.
	maxInteractions = 50
)

// namedLimits are the limits a tag names rather than repeats, because the
// store or another package declares and checks them too.
var namedLimits = map[string]int64{
	"page":          maxLimit,                                  // limit of every list
	"session_id":    repo.MaxSessionID,                         // an agent session's id
	"session_label": repo.MaxLabel,                             // start_session.label
	"search_query":  search.MaxSearchQuery,                     // search.query
	"competitors":   reports.MaxCompetitors,                    // update_settings.competitors
	"team_name":     reports.MaxTeamName,                       // update_settings.team_name
	"slack_options": maxSlackOptions,                           // ask_slack.options
	"slack_text":    maxSlackText,                              // send_slack_message.text
	"email_base64":  base64Chars(maxImportBytes),               // import_email.raw_base64
	"media_base64":  base64Chars(pipeline.InlineMediaMaxBytes), // upload_media.content_base64
	"figure":        MaxFigure,                                 // reach, audience_size
	"agenda_days":   maxAgendaDays,                             // get_agenda's day windows
	"interactions":  maxInteractions,                           // a dossier's latest interactions
}

// base64Chars is the length of the base64 of n bytes as mail and MIME
// encoders write it (lines of 76 characters ending in CRLF): the longest
// text that can carry n bytes, so that n bytes in any common layout fit.
func base64Chars(n int64) int64 {
	chars := 4 * ((n + 2) / 3)
	return chars + 2*((chars+75)/76)
}

// limitTag reads a min or max tag: a figure or a named limit.
func limitTag(field, tag, v string) int64 {
	if n, ok := namedLimits[v]; ok {
		return n
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("field %s: %s tag %q is neither a figure nor a named limit: %v", field, tag, v, err))
	}
	return n
}

// argField is one argument's limit.
type argField struct {
	index []int
	name  string
	// max is the longest string (characters), the longest array (elements)
	// or the largest number; 0 for no bound (numbers without a tag).
	max int64
	// min is the least number, when hasMin.
	min    int64
	hasMin bool
	// kind is the field's Go kind (pointers dereferenced).
	kind reflect.Kind
	// id marks fields holding UUIDs (id, *_id, *_ids), lower-cased on
	// decoding: UUIDs are case-insensitive.
	id bool
}

// argSpec is what decode checks of one tool's arguments.
type argSpec struct {
	required []string
	fields   []argField
}

// notUUIDs are *_id arguments whose values are not (only) UUIDs.
var notUUIDs = map[string]bool{"session_id": true, "slack_user_id": true}

func newArgSpec(t reflect.Type) argSpec {
	spec := argSpec{required: requiredFields(t)}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := jsonName(f)
		if name == "" {
			continue
		}
		a := argField{index: f.Index, name: name}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		a.kind = ft.Kind()
		switch ft.Kind() {
		case reflect.String:
			a.max = MaxText
		case reflect.Slice:
			a.max = MaxItems
		}
		if m := f.Tag.Get("max"); m != "" {
			a.max = limitTag(name, "max", m)
		}
		if m := f.Tag.Get("min"); m != "" {
			a.min, a.hasMin = limitTag(name, "min", m), true
		}
		a.id = (name == "id" || strings.HasSuffix(name, "_id") || strings.HasSuffix(name, "_ids")) && !notUUIDs[name]
		spec.fields = append(spec.fields, a)
	}
	return spec
}

// describe writes the limits into the tool's input schema. An object
// argument is free-form (repo.CheckFreeForm); its rules, like the default
// lengths, are said once, in the server's instructions.
func (spec argSpec) describe(s *jsonschema.Schema) {
	for _, a := range spec.fields {
		p := s.Properties[a.name]
		if p == nil {
			continue
		}
		kind := p.Type
		if kind == "" && len(p.Types) > 0 {
			kind = p.Types[len(p.Types)-1]
		}
		switch kind {
		case "string":
			// An enum says more than a length; the default length
			// (MaxText) is said once, in the server's instructions.
			if len(p.Enum) == 0 && a.max != MaxText {
				p.MaxLength = ptr(int(a.max))
			}
		case "array":
			if a.max != MaxItems {
				p.MaxItems = ptr(int(a.max))
			}
		case "integer", "number":
			if a.max > 0 {
				p.Maximum = ptr(float64(a.max))
			}
			if a.hasMin {
				p.Minimum = ptr(float64(a.min))
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// check enforces the limits on decoded arguments, and lower-cases UUIDs.
func (spec argSpec) check(v reflect.Value) error {
	for _, a := range spec.fields {
		f := v.FieldByIndex(a.index)
		for f.Kind() == reflect.Pointer {
			if f.IsNil() {
				break
			}
			f = f.Elem()
		}
		switch f.Kind() {
		case reflect.String:
			if err := checkText(a.name, f.String(), a.max); err != nil {
				return err
			}
			if a.id {
				f.SetString(normalID(f.String()))
			}
		case reflect.Slice:
			if int64(f.Len()) > a.max {
				return repo.Invalid(a.name, "has %d elements; at most %d are allowed", f.Len(), a.max)
			}
			for i := 0; i < f.Len(); i++ {
				e := f.Index(i)
				if e.Kind() != reflect.String {
					continue
				}
				if err := checkText(fmt.Sprintf("%s[%d]", a.name, i), e.String(), MaxText); err != nil {
					return err
				}
				if a.id {
					e.SetString(normalID(e.String()))
				}
			}
		case reflect.Int, reflect.Int64:
			n := f.Int()
			switch {
			case a.hasMin && n < a.min && a.min == 0 && a.max > 0:
				return repo.Invalid(a.name, "%d is negative, out of range; use 0 to %d", n, a.max)
			case a.hasMin && n < a.min && a.min == 0:
				return repo.Invalid(a.name, "%d is negative; use 0 or more", n)
			case a.hasMin && a.max > 0 && (n < a.min || n > a.max):
				return repo.Invalid(a.name, "%d is out of range; use %d to %d", n, a.min, a.max)
			case a.hasMin && n < a.min:
				return repo.Invalid(a.name, "%d is too small; the minimum is %d", n, a.min)
			case a.max > 0 && n > a.max:
				return repo.Invalid(a.name, "%d is too large; the maximum is %d", n, a.max)
			}
		case reflect.Map:
			if obj, ok := f.Interface().(map[string]any); ok {
				if err := repo.CheckFreeForm(a.name, obj); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkText(field, s string, max int64) error {
	if int64(len(s)) > max { // bytes ≥ characters: count only when it may matter
		if n := utf8.RuneCountInString(s); int64(n) > max {
			return repo.Invalid(field, "is %d characters long; the maximum is %d", n, max)
		}
	}
	return nil
}

// normalID lower-cases a UUID written in upper or mixed case, so that it
// names the record it names in lower case; anything else is left as it is
// (and refused, where a UUID is required, by the tool's own check).
func normalID(s string) string {
	if len(s) == 36 && s != strings.ToLower(s) {
		if _, err := uuid.Parse(s); err == nil {
			return strings.ToLower(s)
		}
	}
	return s
}

// validText reports whether JSON text is valid UTF-8 whose \u escapes name
// characters: a lone surrogate escape (\ud800 without its pair) would be
// decoded as U+FFFD, silently changing what the caller sent.
func validText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	inString := false
	pendingHigh := false // the previous escape was a high surrogate
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			if pendingHigh {
				return false
			}
			inString = false
			continue
		case '\\':
			if i+1 >= len(b) {
				return false
			}
			if b[i+1] != 'u' {
				if pendingHigh {
					return false
				}
				i++
				continue
			}
			if i+6 > len(b) {
				return false
			}
			r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
			if err != nil {
				return false
			}
			i += 5
			switch {
			case r >= 0xD800 && r < 0xDC00:
				if pendingHigh {
					return false
				}
				pendingHigh = true
			case r >= 0xDC00 && r < 0xE000:
				if !pendingHigh {
					return false
				}
				pendingHigh = false
			default:
				if pendingHigh {
					return false
				}
			}
			continue
		}
		if pendingHigh {
			return false
		}
	}
	return !pendingHigh
}
