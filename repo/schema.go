package repo

import (
	"slices"

	"outreach/ledger"
	"outreach/ledger/index"
)

// The domain's registration with the engine (ledger.Schema): the kinds of
// record by collection, the fields that never enter the change log, the
// collections Verify checks, and what the index keeps. Open hands it to the
// write path; the engine's files read it from there, never from here.
func domainSchema(s *Store) ledger.Schema {
	return ledger.Schema{Kinds: kinds, Redacted: redacted, Records: slices.Clone(recordCollections), Index: reactions.words(mirrorSpecs),
		Caches: map[string]func(){CollKeys: s.keys.invalidate}}
}

// redacted lists, per collection, fields whose values never enter change_log.
var redacted = map[string][]string{CollKeys: {"key_hash", "scram"}, CollOAuthGrants: {"access_hash", "refresh_hash", "used_refresh_hashes"},
	CollOAuthRequests: {"code_hash", "consent_hash", "upstream_hash", "code_challenge", "state", "nonce"}, CollSignIns: {"password_hash", "invite_hash"}, CollSettings: {"secret"},
	CollMailboxes: {"refresh_sealed"}}

// recordCollections are the collections written through the write path.
var recordCollections = []string{CollOutlets, CollContacts, CollChannels, CollCampaigns, CollOpportunities,
	CollCoverage, CollMedia, CollNotes, CollEmails, CollUsers, CollKeys, CollOAuthGrants, CollOAuthClients, CollOAuthRequests, CollSignIns, CollSettings,
	CollSubscriptions, CollNotifications, CollDeliveries, CollMessages, CollHeld, CollPitches, CollSuppressions, CollSharedReports, CollMailboxes}

// RecordCollections are the collections Verify checks record by record.
func RecordCollections() []string { return append([]string(nil), recordCollections...) }

// kind names a collection's records in messages.
var kinds = map[string]string{
	CollOutlets: "outlet", CollContacts: "contact", CollChannels: "channel", CollCampaigns: "campaign",
	CollOpportunities: "opportunity", CollCoverage: "coverage", CollMedia: "media", CollNotes: "note",
	CollEmails: "email thread", CollUsers: "user", CollKeys: "agent key", CollOAuthGrants: "OAuth grant", CollOAuthClients: "OAuth client", CollOAuthRequests: "authorization request", CollSignIns: "sign-in", CollSettings: "setting",
	CollSubscriptions: "subscription", CollNotifications: "notification", CollDeliveries: "delivery", CollMessages: "Slack message",
	CollHeld: "held email", CollPitches: "pitch", CollSuppressions: "suppression", CollSharedReports: "shared report", CollMailboxes: "mailbox connection",
}

// KindOf names a collection's records in messages, whatever the collection.
func KindOf(coll string) string {
	if k, ok := kinds[coll]; ok {
		return k
	}
	return coll + " record"
}

// mirrorSpecs say what the index keeps of each collection (index.Spec).
// The collections that grow with the team's history hold only the paths
// their queries filter, sort or are covered by (Keep: what the list, log,
// dossier, report, rule and write-path queries of this package and of
// ledger name, and the bookkeeping fields the serial write's guard reads
// from the index); a query on any other path goes to the store. The text a
// search reads is left out (Drop): the word index holds its words
// (package textlist), and Drop keeps the large text out of the store's answers
// while the index builds.
var mirrorSpecs = map[string]index.Spec{
	CollNotes: {Keep: []string{"archived_at", "type", "occurred_at", "links", fieldVersion, fieldLastChange, fieldLockedBy},
		Drop: []string{"content"}, Keys: []string{"links.contact_id", "links.outlet_id", "links.opportunity_id", "links.id"}},
	CollCoverage: {Keep: []string{"archived_at", "title", "url", "published_at", "type", "sentiment", "reach",
		"outlet_id", "channel_id", "opportunity_id", "campaign_id", "contact_ids", fieldVersion, fieldLastChange, fieldLockedBy},
		Drop: []string{"summary", "full_text"}, Keys: []string{"contact_ids", "outlet_id", "opportunity_id", "campaign_id"}},
	CollEmails: {Keep: []string{"archived_at", "subject", "subject_key", "last_message_at", "contact_ids", "opportunity_links",
		"messages.contact_ids", "messages.message_id", fieldVersion, fieldLastChange, fieldLockedBy},
		Drop: []string{"messages.body_text", "messages.references", "messages.attachments"}, Keys: []string{"messages.contact_ids", "contact_ids", "opportunity_links.opportunity_id", "opportunity_links.id"}},
	CollChangeLog: {Keep: []string{"seq", "at", "collection", "record_id", "action", "state", "user_id", "agent_id", "session_id",
		"reverts", "idempotency_key"},
		Drop: []string{"before", "after", "sealed"}, Keys: []string{"record_id", "session_id", "idempotency_key", "reverts"}},
	CollOpportunities: {Drop: []string{"notes", "pitch"}, Keys: []string{"contact_ids", "outlet_id", "campaign_id"}},
	CollContacts:      {Drop: []string{"notes", "bio"}, Keys: []string{"affiliations.outlet_id", "affiliations.id", "email_lower"}},
	CollOutlets:       {Drop: []string{"notes", "description"}},
	CollCampaigns:     {Drop: []string{"notes", "description", "brief"}},
}

// IndexSpec is what the index keeps of coll's records (mirrorSpecs).
func IndexSpec(coll string) index.Spec { return mirrorSpecs[coll] }
