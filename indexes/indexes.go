// Package indexes is the one declarative list of the service's indexes,
// applied at every start and by `outreach indexes`. Applying it twice changes
// nothing.
package indexes

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Index is one index of one collection.
type Index struct {
	Collection string
	Name       string
	Keys       bson.D
	Unique     bool
	// Text marks a text index, built only where the server supports text
	// search. Text indexes take no language: no stemming and no stop words,
	// so a word is found as it is written (search decides matches literally).
	Text bool
}

// List is every index of the service.
var List = []Index{
	{Collection: "change_log", Name: "seq", Keys: bson.D{{Key: "seq", Value: 1}}, Unique: true},
	{Collection: "change_log", Name: "record", Keys: bson.D{{Key: "record_id", Value: 1}, {Key: "seq", Value: -1}}},
	{Collection: "change_log", Name: "session", Keys: bson.D{{Key: "session_id", Value: 1}, {Key: "seq", Value: -1}}},
	{Collection: "change_log", Name: "state_at", Keys: bson.D{{Key: "state", Value: 1}, {Key: "at", Value: 1}}},
	{Collection: "change_log", Name: "reverts", Keys: bson.D{{Key: "reverts", Value: 1}}},
	// A retry of a call with an idempotency key looks up the call's entries.
	{Collection: "change_log", Name: "idempotency_key", Keys: bson.D{{Key: "idempotency_key", Value: 1}}},
	{Collection: "agent_keys", Name: "hash", Keys: bson.D{{Key: "key_hash", Value: 1}}, Unique: true},
	{Collection: "agent_keys", Name: "user", Keys: bson.D{{Key: "user_id", Value: 1}}},
	// Every request with an OAuth access token looks its grant up by hash.
	{Collection: "oauth_grants", Name: "access", Keys: bson.D{{Key: "access_hash", Value: 1}}, Unique: true},
	{Collection: "oauth_grants", Name: "refresh", Keys: bson.D{{Key: "refresh_hash", Value: 1}}, Unique: true},
	{Collection: "oauth_grants", Name: "used_refresh", Keys: bson.D{{Key: "used_refresh_hashes", Value: 1}}},
	{Collection: "oauth_grants", Name: "user", Keys: bson.D{{Key: "user_id", Value: 1}}},
	{Collection: "oauth_requests", Name: "code", Keys: bson.D{{Key: "code_hash", Value: 1}}},
	{Collection: "sign_ins", Name: "email", Keys: bson.D{{Key: "email", Value: 1}}},
	{Collection: "sign_ins", Name: "invite", Keys: bson.D{{Key: "invite_hash", Value: 1}}},
	{Collection: "users", Name: "email", Keys: bson.D{{Key: "email", Value: 1}}, Unique: true},
	{Collection: "notes", Name: "occurred", Keys: bson.D{{Key: "occurred_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "notes", Name: "contact_links", Keys: bson.D{{Key: "links.contact_id", Value: 1}}},
	{Collection: "notes", Name: "outlet_links", Keys: bson.D{{Key: "links.outlet_id", Value: 1}}},
	{Collection: "notes", Name: "opportunity_links", Keys: bson.D{{Key: "links.opportunity_id", Value: 1}}},
	{Collection: "notes", Name: "channel_links", Keys: bson.D{{Key: "links.channel_id", Value: 1}}},
	{Collection: "notes", Name: "link_ids", Keys: bson.D{{Key: "links.id", Value: 1}}},
	{Collection: "notes", Name: "text", Keys: bson.D{{Key: "title", Value: "text"}, {Key: "content", Value: "text"}}, Text: true},
	// get_sync_status reads every mailbox's sync state (settings named email_sync).
	{Collection: "settings", Name: "name", Keys: bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 1}}},
	// The sync reads a mailbox's held messages; get_sync_status pages them.
	{Collection: "email_held", Name: "mailbox", Keys: bson.D{{Key: "account", Value: 1}, {Key: "mailbox", Value: 1}, {Key: "resolved_at", Value: 1}, {Key: "uid_validity", Value: 1}, {Key: "uid", Value: 1}}},
	{Collection: "email_held", Name: "open", Keys: bson.D{{Key: "resolved_at", Value: 1}, {Key: "reason", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "email_held", Name: "open_all", Keys: bson.D{{Key: "resolved_at", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	// The delivery worker looks for due pitches; replies and bounces find
	// their pitch by Message-ID; a contact's dossier and the double-pitch
	// guard by recipient; a send checks the suppression list by address.
	{Collection: "pitches", Name: "state", Keys: bson.D{{Key: "state", Value: 1}}},
	{Collection: "pitches", Name: "message_id", Keys: bson.D{{Key: "recipients.message_id", Value: 1}}},
	{Collection: "pitches", Name: "recipients", Keys: bson.D{{Key: "recipients.contact_id", Value: 1}}},
	{Collection: "pitches", Name: "opportunity", Keys: bson.D{{Key: "opportunity_id", Value: 1}}},
	{Collection: "suppressions", Name: "email", Keys: bson.D{{Key: "email_lower", Value: 1}}},
	{Collection: "email_threads", Name: "text", Keys: bson.D{{Key: "subject", Value: "text"}, {Key: "messages.subject", Value: "text"}, {Key: "messages.body_text", Value: "text"}, {Key: "messages.from", Value: "text"}}, Text: true},
	{Collection: "email_threads", Name: "contacts", Keys: bson.D{{Key: "contact_ids", Value: 1}}},
	{Collection: "email_threads", Name: "opportunities", Keys: bson.D{{Key: "opportunity_links.opportunity_id", Value: 1}}},
	{Collection: "email_threads", Name: "last_message", Keys: bson.D{{Key: "last_message_at", Value: -1}}},
	// A message is stored once, whatever thread it is in and however many instances sync.
	{Collection: "email_threads", Name: "message_key", Keys: bson.D{{Key: "messages.message_id", Value: 1}}, Unique: true},
	{Collection: "email_threads", Name: "message_contacts", Keys: bson.D{{Key: "messages.contact_ids", Value: 1}}},
	{Collection: "email_threads", Name: "subject_key", Keys: bson.D{{Key: "subject_key", Value: 1}, {Key: "last_message_at", Value: -1}}},
	{Collection: "email_threads", Name: "opportunity_link_ids", Keys: bson.D{{Key: "opportunity_links.id", Value: 1}}},
	{Collection: "coverage", Name: "text", Keys: bson.D{{Key: "title", Value: "text"}, {Key: "summary", Value: "text"}, {Key: "url", Value: "text"}, {Key: "full_text", Value: "text"}}, Text: true},
	{Collection: "coverage", Name: "published", Keys: bson.D{{Key: "published_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "coverage", Name: "contacts", Keys: bson.D{{Key: "contact_ids", Value: 1}}},
	{Collection: "coverage", Name: "outlet", Keys: bson.D{{Key: "outlet_id", Value: 1}}},
	{Collection: "coverage", Name: "opportunity", Keys: bson.D{{Key: "opportunity_id", Value: 1}}},
	{Collection: "contacts", Name: "text", Keys: bson.D{{Key: "name", Value: "text"}, {Key: "email", Value: "text"}, {Key: "title", Value: "text"}, {Key: "bio", Value: "text"}, {Key: "beats", Value: "text"}, {Key: "location", Value: "text"}}, Text: true},
	{Collection: "contacts", Name: "email", Keys: bson.D{{Key: "email_lower", Value: 1}}},
	{Collection: "contacts", Name: "affiliation_outlets", Keys: bson.D{{Key: "affiliations.outlet_id", Value: 1}}},
	{Collection: "contacts", Name: "affiliation_ids", Keys: bson.D{{Key: "affiliations.id", Value: 1}}},
	{Collection: "channels", Name: "outlet", Keys: bson.D{{Key: "outlet_id", Value: 1}}},
	{Collection: "outlets", Name: "text", Keys: bson.D{{Key: "name", Value: "text"}, {Key: "website", Value: "text"}, {Key: "description", Value: "text"}, {Key: "topics", Value: "text"}}, Text: true},
	{Collection: "opportunities", Name: "text", Keys: bson.D{{Key: "title", Value: "text"}, {Key: "description", Value: "text"}, {Key: "next_action", Value: "text"}}, Text: true},
	{Collection: "opportunities", Name: "campaign", Keys: bson.D{{Key: "campaign_id", Value: 1}}},
	{Collection: "opportunities", Name: "outlet", Keys: bson.D{{Key: "outlet_id", Value: 1}}},
	{Collection: "opportunities", Name: "contacts", Keys: bson.D{{Key: "contact_ids", Value: 1}}},
	{Collection: "media", Name: "coverage", Keys: bson.D{{Key: "coverage_id", Value: 1}}},
	// The list tools' pages and totals: records not archived (archived_at
	// null), newest first. The explain test (integration) found these
	// shapes scanning without them.
	{Collection: "contacts", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "channels", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "opportunities", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "media", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "notes", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "occurred_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "coverage", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "published_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "email_threads", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "last_message_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "pitches", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "pitches", Name: "created", Keys: bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "suppressions", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "suppressions", Name: "reason", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "reason", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "shared_reports", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "shared_at", Value: -1}, {Key: "_id", Value: 1}}},
	{Collection: "outlets", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "outlets", Name: "created", Keys: bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "outlets", Name: "tier", Keys: bson.D{{Key: "tier", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "users", Name: "live", Keys: bson.D{{Key: "archived_at", Value: 1}, {Key: "_id", Value: 1}}},
	{Collection: "coverage", Name: "campaign", Keys: bson.D{{Key: "campaign_id", Value: 1}}},
	// Every record newest first (include_archived), and channels of one type.
	{Collection: "contacts", Name: "created", Keys: bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "channels", Name: "created", Keys: bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "opportunities", Name: "created", Keys: bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "media", Name: "created", Keys: bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: "channels", Name: "type", Keys: bson.D{{Key: "type", Value: 1}, {Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}},
	// GridFS's own indexes, under the names drivers give them, so the bucket is a standard one.
	{Collection: "fs.chunks", Name: "files_id_1_n_1", Keys: bson.D{{Key: "files_id", Value: 1}, {Key: "n", Value: 1}}, Unique: true},
	{Collection: "fs.files", Name: "filename_1_uploadDate_1", Keys: bson.D{{Key: "filename", Value: 1}, {Key: "uploadDate", Value: 1}}},
}

// Apply creates every index of List in db; text indexes only when text is true.
func Apply(ctx context.Context, db *mongo.Database, text bool) error {
	for _, ix := range List {
		if ix.Text && !text {
			continue
		}
		opts := options.Index().SetName(ix.Name)
		if ix.Unique {
			opts.SetUnique(true)
		}
		if ix.Text {
			opts.SetDefaultLanguage("none")
		}
		_, err := db.Collection(ix.Collection).Indexes().CreateOne(ctx, mongo.IndexModel{Keys: ix.Keys, Options: opts})
		if err != nil {
			return fmt.Errorf("index %s.%s: %w", ix.Collection, ix.Name, err)
		}
	}
	return nil
}
