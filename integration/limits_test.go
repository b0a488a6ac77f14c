package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"outreach/integration/testenv"
	"outreach/slackmsg"
	"outreach/tools"
)

// argSchema is the part of a tool's advertised input schema the probe reads.
type argSchema struct {
	Type      any                   `json:"type"`
	Enum      []any                 `json:"enum"`
	MaxLength *int64                `json:"maxLength"`
	MaxItems  *int64                `json:"maxItems"`
	Maximum   *float64              `json:"maximum"`
	Minimum   *float64              `json:"minimum"`
	Items     *argSchema            `json:"items"`
	Props     map[string]*argSchema `json:"properties"`
	Required  []string              `json:"required"`
}

// jsonType is the schema's type, without "null".
func (s *argSchema) jsonType() string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if e != "null" {
				return fmt.Sprint(e)
			}
		}
	}
	return ""
}

// sample is a plain value of the schema's type.
func (s *argSchema) sample() any {
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	switch s.jsonType() {
	case "string":
		return "x"
	case "integer", "number":
		if s.Minimum != nil {
			return int64(*s.Minimum)
		}
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	}
	return nil
}

// text is a string of n characters for the argument name: base64 of as
// many bytes as n characters carry when wrapped as MIME wraps it (a short
// mail message first, so that import_email reads a message), else letters.
func text(name string, n int64) string {
	if !strings.HasSuffix(name, "_base64") {
		return strings.Repeat("a", int(n))
	}
	wrapped := func(k int) int { // characters of k bytes in base64, wrapped
		chars := 4 * ((k + 2) / 3)
		return chars + 2*((chars+75)/76)
	}
	k := 0 // the most bytes n characters carry, then the fewest bytes of that length
	for step := 1 << 30; step > 0; step /= 2 {
		if int64(wrapped(k+step)) <= n {
			k += step
		}
	}
	for k > 0 && wrapped(k-1) == wrapped(k) {
		k--
	}
	payload := []byte("From: probe@nowhere.example\r\nTo: team@nowhere.example\r\nSubject: probe\r\n\r\n")
	if k > len(payload) {
		payload = append(payload, bytes.Repeat([]byte("a"), k-len(payload))...)
	}
	enc := base64.StdEncoding.EncodeToString(payload[:min(k, len(payload))])
	var b strings.Builder
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n")
	return b.String() + strings.Repeat(" ", int(n)-b.Len()) // spaces, which decoding drops
}

// sizeRefusal matches the messages that refuse a value for its size.
var sizeRefusal = regexp.MustCompile(`(?i)characters|elements|names; the most|too (long|large|small|many)|at most|the most|maximum|minimum|out of range|negative|capped|bytes`)

// TestLimitsMatchSchemas probes every tool's every bounded argument, as
// tools/list advertises it (maxLength, maxItems, maximum, minimum, or the
// default limits the instructions state): a value
// at the limit is not refused for its size, and one past it is
// invalid_argument naming the argument. The other required arguments get
// plain values of their types, so a call may fail for them (not_found,
// invalid_argument on another field), never for the probed one's size.
func TestLimitsMatchSchemas(t *testing.T) {
	parallelOnEmbedded(t)
	env := testenv.New(t)
	c := env.Admin()
	list, err := c.Session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	probes := 0
	for _, tool := range list.Tools {
		raw, _ := json.Marshal(tool.InputSchema)
		var s argSchema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		// The schemas leave out the default limits, which the server's
		// instructions state: a string of 1,000 characters, an array of 100.
		for _, p := range s.Props {
			switch {
			case p.jsonType() == "string" && len(p.Enum) == 0 && p.MaxLength == nil:
				p.MaxLength = ptrTo(int64(tools.MaxText))
			case p.jsonType() == "array" && p.MaxItems == nil:
				p.MaxItems = ptrTo(int64(tools.MaxItems))
			}
		}
		call := func(field string, v any) (json.RawMessage, *testenv.Error) {
			args := M{}
			for _, r := range s.Required {
				args[r] = s.Props[r].sample()
			}
			args[field] = v
			return c.Call(tool.Name, args)
		}
		for field, p := range s.Props {
			var at, past []any // values at the limits, and one past each
			var limits []string
			switch {
			case p.MaxLength != nil:
				at, past = append(at, text(field, *p.MaxLength)), append(past, text(field, *p.MaxLength+1))
				limits = append(limits, fmt.Sprintf("maxLength %d", *p.MaxLength))
			case p.MaxItems != nil:
				elem := any("x")
				if p.Items != nil {
					elem = p.Items.sample()
				}
				n := int(*p.MaxItems)
				at = append(at, slicesOf(elem, n))
				past = append(past, slicesOf(elem, n+1))
				limits = append(limits, fmt.Sprintf("maxItems %d", n))
			}
			if p.Maximum != nil {
				at, past = append(at, int64(*p.Maximum)), append(past, int64(*p.Maximum)+1)
				limits = append(limits, fmt.Sprintf("maximum %d", int64(*p.Maximum)))
			}
			if p.Minimum != nil {
				at, past = append(at, int64(*p.Minimum)), append(past, int64(*p.Minimum)-1)
				limits = append(limits, fmt.Sprintf("minimum %d", int64(*p.Minimum)))
			}
			for i := range at {
				probes++
				if _, e := call(field, at[i]); e != nil && e.Code == "invalid_argument" &&
					(e.Field == field || strings.HasPrefix(e.Field, field+"[")) && sizeRefusal.MatchString(e.Message) {
					t.Errorf("%s.%s at its advertised %s: refused: %s", tool.Name, field, limits[i], e.Message)
				}
				raw, e := call(field, past[i])
				switch {
				case e == nil:
					t.Errorf("%s.%s one past its advertised %s: accepted: %.200s", tool.Name, field, limits[i], raw)
				case e.Code != "invalid_argument" || e.Field != field:
					t.Errorf("%s.%s one past its advertised %s: %s on %q (%s); want invalid_argument on %s", tool.Name, field, limits[i], e.Code, e.Field, e.Message, field)
				}
			}
		}
	}
	if probes < 300 {
		t.Errorf("only %d limits probed", probes)
	}
}

func slicesOf(v any, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestImportEmailOneMiB: docs/limits.md's 1 MiB is what import_email takes, in
// base64 wrapped as mail tools write it; a byte more is refused naming
// raw_base64, and nothing is stored.
func TestImportEmailOneMiB(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	c.Must("create_contact", M{"first_name": "Big", "last_name": "Sender", "email": "big@sender.example"}, nil)
	message := func(size int) string {
		head := "From: Big Sender <big@sender.example>\r\nTo: team@ours.example\r\nSubject: the long read\r\n" +
			"Message-ID: <long-" + fmt.Sprint(size) + "@sender.example>\r\nDate: Mon, 02 Nov 2026 10:00:00 +0000\r\n\r\n"
		body := strings.Repeat(strings.Repeat("x", 78)+"\r\n", size/80+1)
		raw := (head + body)[:size]
		enc := base64.StdEncoding.EncodeToString([]byte(raw))
		var b strings.Builder
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc)
		return b.String()
	}
	var imp struct {
		Outcome string `json:"outcome"`
	}
	c.Must("import_email", M{"raw_base64": message(1 << 20)}, &imp)
	if imp.Outcome != "stored" {
		t.Fatalf("a 1 MiB message: %+v", imp)
	}
	if e := c.Fail("import_email", M{"raw_base64": message(1<<20 + 1)}, "invalid_argument"); e.Field != "raw_base64" {
		t.Errorf("1 MiB and a byte: refused on %q (%s), want raw_base64", e.Field, e.Message)
	}
	var threads struct{ Total int }
	c.Must("list_email_threads", M{}, &threads)
	if threads.Total != 1 {
		t.Errorf("%d threads, want the one message imported", threads.Total)
	}
}

// TestSlackMessageLimit: send_slack_message posts docs/limits.md's 4,000
// characters, and refuses 4,001 naming text without posting.
func TestSlackMessageLimit(t *testing.T) {
	fs := newFakeSlack(t)
	sc := slackmsg.New(slackmsg.Config{BotToken: fs.Token, Channel: "C0TEAM", APIURL: fs.APIURL(), MaxWait: 5 * time.Second})
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{tools.WithSlack(sc)}})
	c := env.Admin()
	long := strings.Repeat("é", 4000)
	c.Must("send_slack_message", M{"text": long}, nil)
	if e := c.Fail("send_slack_message", M{"text": long + "."}, "invalid_argument"); e.Field != "text" {
		t.Errorf("4,001 characters: refused on %q, want text", e.Field)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.posts) != 1 || fs.posts[0].Text != long {
		t.Errorf("%d posts; want the one of 4,000 characters", len(fs.posts))
	}
}
