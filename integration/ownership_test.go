package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/repo"
)

// TestNotificationsBelongToTheirMember: a read,write key reads and marks only
// its own user's notifications and manages only its own subscriptions;
// naming another member is permission_denied on the field, and writes
// nothing. An admin may act for another member, and the change entries say
// for whom (on_behalf_of) beside who acted (user_id).
func TestNotificationsBelongToTheirMember(t *testing.T) {
	env := testenv.New(t)
	admin := env.Admin()
	member := func(name string) (string, *testenv.Client) {
		id := testenv.ID(t, admin.Must("create_user", M{"name": name, "email": name + "@example.com"}, nil))
		var k struct{ Key string }
		admin.Must("create_agent_key", M{"user_id": id, "name": name + "'s agent", "scopes": []string{"read", "write"}}, &k)
		return id, env.Client(k.Key, name+"-session")
	}
	annID, ann := member("ann")
	bobID, bob := member("bob")
	opp := testenv.ID(t, admin.Must("create_opportunity", M{"title": "Ownership"}, nil))
	other := testenv.ID(t, admin.Must("create_opportunity", M{"title": "Ownership, the sequel"}, nil))

	bob.Must("subscribe_opportunity", M{"opportunity_id": opp}, nil)
	ann.Must("subscribe_opportunity", M{"opportunity_id": opp}, nil)
	admin.Must("update_opportunity_stage", M{"id": opp, "stage": "pitched"}, nil)
	bobs := notifications(t, bob, M{})
	if len(bobs) != 1 || bobs[0].UserID != bobID {
		t.Fatalf("bob's notifications: %+v", bobs)
	}
	if own := notifications(t, ann, M{"user_id": annID}); len(own) != 1 || own[0].UserID != annID {
		t.Fatalf("ann's own notifications, named: %+v", own)
	}

	// Ann may not act for Bob: each refusal names the field and writes nothing.
	before := collChanges(t, admin, "subscriptions") + collChanges(t, admin, "notifications")
	for _, c := range []struct {
		tool  string
		args  M
		field string
	}{
		{"list_notifications", M{"user_id": bobID}, "user_id"},
		{"list_subscriptions", M{"user_id": bobID}, "user_id"},
		{"subscribe_opportunity", M{"opportunity_id": other, "user_id": bobID}, "user_id"},
		{"unsubscribe_opportunity", M{"opportunity_id": opp, "user_id": bobID}, "user_id"},
		{"mark_notifications_read", M{"ids": []string{bobs[0].ID}}, "ids[0]"},
	} {
		e := ann.Fail(c.tool, c.args, repo.CodePermissionDenied)
		if e.Field != c.field {
			t.Errorf("%s(%v): field %q, want %q (%s)", c.tool, c.args, e.Field, c.field, e.Message)
		}
	}
	if after := collChanges(t, admin, "subscriptions") + collChanges(t, admin, "notifications"); after != before {
		t.Errorf("refused calls wrote %d change entries", after-before)
	}
	if n := notifications(t, bob, M{"unread_only": true}); len(n) != 1 {
		t.Errorf("bob's unread notifications after ann's refused mark: %+v", n)
	}
	var subs struct{ Total int }
	bob.Must("list_subscriptions", M{}, &subs)
	if subs.Total != 1 {
		t.Errorf("bob's subscriptions after ann's refused unsubscribe: %d, want 1", subs.Total)
	}

	// The admin acts for Bob, and the change log says so.
	if n := notifications(t, admin, M{"user_id": bobID}); len(n) != 1 || n[0].ID != bobs[0].ID {
		t.Errorf("admin listing bob's notifications: %+v", n)
	}
	admin.Must("mark_notifications_read", M{"ids": []string{bobs[0].ID}}, nil)
	subID := testenv.ID(t, admin.Must("subscribe_opportunity", M{"opportunity_id": other, "user_id": bobID}, nil))
	admin.Must("unsubscribe_opportunity", M{"opportunity_id": other, "user_id": bobID}, nil)
	type entry struct {
		Action     string `json:"action"`
		Tool       string `json:"tool"`
		UserID     string `json:"user_id"`
		OnBehalfOf string `json:"on_behalf_of"`
	}
	var log struct{ Changes []entry }
	admin.Must("get_change_log", M{"record_id": bobs[0].ID}, &log)
	if len(log.Changes) == 0 {
		t.Fatal("no change entry for the notification")
	}
	if diff := cmp.Diff(entry{"update", "mark_notifications_read", env.AdminUserID, bobID}, log.Changes[0]); diff != "" {
		t.Errorf("the admin's mark of bob's notification (-want +got):\n%s", diff)
	}
	log.Changes = nil
	admin.Must("get_change_log", M{"record_id": subID}, &log)
	want := []entry{
		{"archive", "unsubscribe_opportunity", env.AdminUserID, bobID},
		{"create", "subscribe_opportunity", env.AdminUserID, bobID},
	}
	if diff := cmp.Diff(want, log.Changes); diff != "" {
		t.Errorf("the admin's subscription for bob (-want +got):\n%s", diff)
	}
	// A member acting on their own data is not on anyone's behalf.
	ann.Must("mark_notifications_read", M{"ids": []string{notifications(t, ann, M{})[0].ID}}, nil)
	var own struct{ Changes []entry } // a fresh one: decoding leaves fields the JSON omits as they were
	admin.Must("get_change_log", M{"collection": "notifications", "action": "update", "limit": 1}, &own)
	if diff := cmp.Diff([]entry{{"update", "mark_notifications_read", annID, ""}}, own.Changes); diff != "" {
		t.Errorf("ann marking her own notification (-want +got):\n%s", diff)
	}
}
