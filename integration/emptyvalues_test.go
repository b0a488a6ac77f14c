package integration

import (
	"encoding/json"
	"fmt"
	"testing"

	"outreach/integration/testenv"
)

// emptyValues lists where v holds "" or null, except the lifecycle dates
// (null until their event), a related record's slot (null when none is
// linked) and a metric that is undefined (null).
func emptyValues(path string, v any, out *[]string) {
	switch x := v.(type) {
	case nil:
		*out = append(*out, path+" = null")
	case string:
		if x == "" {
			*out = append(*out, path+` = ""`)
		}
	case map[string]any:
		for k, e := range x {
			if e == nil && (k == "archived_at" || k == "revoked_at" || k == "expires_at" || k == "last_used_at" ||
				k == "outlet" || k == "channel" || k == "campaign" || k == "opportunity" || k == "win_rate") {
				continue
			}
			emptyValues(path+"."+k, e, out)
		}
	case []any:
		for i, e := range x {
			emptyValues(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	}
}

// TestEmptyValuesInToolResults creates records with only their required
// fields and reads them back: an unset field is absent, never "" and never
// null (the rule in docs/data-dictionary.md).
func TestEmptyValuesInToolResults(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	outlet := testenv.ID(t, c.Must("create_outlet", testenv.M{"name": "Bare Outlet"}, nil))
	contact := testenv.ID(t, c.Must("create_contact", testenv.M{"first_name": "Bare", "last_name": "Contact"}, nil))
	channel := testenv.ID(t, c.Must("create_channel", testenv.M{"outlet_id": outlet, "type": "website"}, nil))
	c.Must("add_contact_outlet", testenv.M{"contact_id": contact, "outlet_id": outlet}, nil)
	campaign := testenv.ID(t, c.Must("create_campaign", testenv.M{"name": "Bare Campaign"}, nil))
	opp := testenv.ID(t, c.Must("create_opportunity", testenv.M{"title": "Bare pitch", "campaign_id": campaign}, nil))
	for _, get := range []struct{ tool, id string }{
		{"get_outlet", outlet}, {"get_contact", contact}, {"get_channel", channel}, {"get_campaign", campaign}, {"get_opportunity", opp},
	} {
		raw := c.Must(get.tool, testenv.M{"id": get.id}, nil)
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		var bad []string
		emptyValues(get.tool, v, &bad)
		if len(bad) > 0 {
			t.Errorf("%s: empty values %v\n%s", get.tool, bad, raw)
		}
	}
}
