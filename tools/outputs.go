package tools

import (
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/backup"
	"outreach/mailauth"
	"outreach/mailsync"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/repo/directory"
	"outreach/repo/dossiers"
	"outreach/repo/inbox"
	"outreach/repo/notes"
	"outreach/repo/notify"
	"outreach/repo/outbox"
	"outreach/repo/pipeline"
	"outreach/repo/pitches"
	"outreach/repo/reports"
	"outreach/repo/search"
)

// Structured output. Every tool declares an outputSchema, derived from the Go
// type its handler returns (the same type whose JSON is the text result), and
// every successful call returns that JSON twice: as content[0].text, exactly
// as before, and as structuredContent. Every result is already a JSON object
// (a record, or an envelope around a list), as MCP requires of
// structuredContent, so nothing is wrapped. Errors stay isError results with
// text content only.
//
// The schemas are strict where the Go type is (a record's fields are
// required unless they are omitted when empty, and no other field appears);
// an integration test validates real results of every group against them.

// outputs holds each tool's result schema, by tool name. A tool without an
// entry gets {"type":"object"}; TestToolOutputSchemas fails for it.
var outputs = map[string]*jsonschema.Schema{
	// Outlets, contacts, channels
	"create_outlet":         of[directory.Outlet](),
	"get_outlet":            of[directory.OutletDetail](),
	"list_outlets":          list[directory.Outlet]("outlets"),
	"update_outlet":         of[directory.Outlet](),
	"archive_outlet":        of[directory.Outlet](),
	"restore_outlet":        of[directory.Outlet](),
	"create_contact":        of[directory.Contact](),
	"get_contact":           of[directory.ContactDetail](),
	"list_contacts":         list[directory.Contact]("contacts"),
	"update_contact":        of[directory.Contact](),
	"add_contact_outlet":    object("affiliation", of[*directory.Affiliation](), "contact", of[*directory.Contact]()),
	"remove_contact_outlet": object("removed", of[*directory.Affiliation](), "contact", of[*directory.Contact]()),
	"archive_contact":       of[directory.Contact](),
	"restore_contact":       of[directory.Contact](),
	"create_channel":        of[directory.Channel](),
	"get_channel":           of[directory.ChannelDetail](),
	"list_channels":         list[directory.Channel]("channels"),
	"update_channel":        of[directory.Channel](),
	"archive_channel":       of[directory.Channel](),
	"restore_channel":       of[directory.Channel](),

	// Campaigns, opportunities, coverage
	"create_campaign": of[pipeline.Campaign](),
	"get_campaign": of[struct {
		*pipeline.Campaign
		Metrics *pipeline.CampaignMetrics `json:"metrics"`
	}](),
	"list_campaigns":             list[campaignWithHeadline]("campaigns"),
	"update_campaign":            of[pipeline.Campaign](),
	"archive_campaign":           of[pipeline.Campaign](),
	"restore_campaign":           of[pipeline.Campaign](),
	"create_opportunity":         of[pipeline.Opportunity](),
	"get_opportunity":            of[pipeline.OpportunityDetail](),
	"list_opportunities":         list[pipeline.Opportunity]("opportunities"),
	"update_opportunity":         of[pipeline.Opportunity](),
	"update_opportunity_stage":   of[pipeline.Opportunity](),
	"add_opportunity_contact":    of[pipeline.Opportunity](),
	"remove_opportunity_contact": of[pipeline.Opportunity](),
	"archive_opportunity":        of[pipeline.Opportunity](),
	"restore_opportunity":        of[pipeline.Opportunity](),
	"create_coverage":            of[pipeline.Coverage](),
	"get_coverage":               of[pipeline.CoverageDetail](),
	"list_coverage":              list[pipeline.Coverage]("coverage"),
	"update_coverage":            of[pipeline.Coverage](),
	"archive_coverage":           of[pipeline.Coverage](),
	"restore_coverage":           of[pipeline.Coverage](),

	// Reports, settings, imports
	"get_coverage_report":  of[reports.CoverageReport](),
	"render_report":        of[renderedReport](),
	"get_pipeline_report":  of[reports.PipelineReport](),
	"share_report":         of[sharedReportView](),
	"list_shared_reports":  of[sharedReportList](),
	"revoke_shared_report": of[sharedReportView](),
	"get_settings":         of[reports.OrgSettings](),
	"update_settings":      of[reports.OrgSettings](),
	"import_contacts":      of[directory.ImportResult](),
	"import_outlets":       of[directory.ImportResult](),

	// Notes, search, dossiers
	"create_note":            of[noteResult](),
	"get_note":               of[noteResult](),
	"list_notes":             list[notes.Note]("notes"),
	"update_note":            of[noteResult](),
	"add_note_link":          of[noteResult](),
	"remove_note_link":       of[noteResult](),
	"archive_note":           of[noteResult](),
	"restore_note":           of[noteResult](),
	"get_interaction_log":    of[dossiers.InteractionLog](),
	"search":                 object("total", of[int](), "showing", of[int](), "limit", of[int](), "offset", of[int](), "search_path", of[string](), "hits", of[[]search.SearchHit]()),
	"get_contact_dossier":    of[dossiers.ContactDossier](),
	"get_outlet_dossier":     of[dossiers.OutletDossier](),
	"get_opportunity_status": of[dossiers.OpportunityStatus](),
	"get_agenda":             of[dossiers.Agenda](),

	// Audit, service, keys
	"get_change_log":   list[audit.Entry]("changes"),
	"get_change":       of[audit.Entry](),
	"rollback_change":  of[repo.Rollback](),
	"rollback_session": of[repo.Rollback](),
	"start_session": object("session_id", of[string](), "label", of[string](), "agent_id", of[string](), "user_id", of[string](),
		"started_at", of[time.Time](), "header", of[string](), "meta_key", of[string]()),
	"list_sessions":  list[repo.Session]("sessions"),
	"list_toolsets":  of[toolsetsResult](),
	"enable_toolset": of[toolsetsResult](),
	"whoami": object("user_id", of[string](), "agent_id", of[string](), "agent_type", of[string](),
		"key_id", of[string](), "key_name", of[string](), "scopes", of[[]string](), "session_id", of[string](), "signed_in_with", of[string]()),
	"list_connected_clients":  object("total", of[int](), "connected_clients", of[[]access.OAuthGrant]()),
	"revoke_connected_client": of[access.OAuthGrant](),
	"get_service_info":        optional(optional(object("version", of[string](), "store", of[repo.Capabilities]()), "backup", of[backup.Status]()), "mailbox", of[mailauth.Status]()),
	"create_agent_key":        object("key", of[string](), "agent_key", of[*repo.AgentKey](), "note", of[string]()),
	"list_agent_keys":         object("total", of[int](), "agent_keys", of[[]repo.AgentKey]()),
	"revoke_agent_key":        of[repo.AgentKey](),
	"list_users":              object("total", of[int](), "users", of[[]repo.User]()),
	"create_user":             of[repo.User](),

	// Media
	"upload_media_url": object("media_id", of[string](), "upload_url", of[string](), "expires_at", of[string](), "instructions", of[string]()),
	"attach_media":     of[pipeline.Media](),
	"upload_media":     of[pipeline.Media](),
	"get_media":        of[mediaView](),
	"list_media":       list[pipeline.Media]("media"),
	"archive_media":    of[pipeline.Media](),
	"restore_media":    of[pipeline.Media](),

	// Emails
	"sync_emails":              of[mailsync.Result](),
	"import_email":             of[inbox.IngestResult](),
	"get_sync_status":          of[syncStatus](),
	"disconnect_mailbox":       of[disconnectMailboxOut](),
	"list_email_threads":       object("total", of[int64](), "showing", of[int](), "limit", of[int](), "offset", of[int](), "threads", of[[]threadSummary]()),
	"get_email_thread":         of[inbox.EmailThreadDetail](),
	"search_emails":            object("total", of[int](), "showing", of[int](), "limit", of[int](), "messages", of[[]inbox.EmailHit]()),
	"get_contact_emails":       object("total", of[int](), "showing", of[int](), "limit", of[int](), "messages", of[[]inbox.EmailHit]()),
	"link_email_opportunity":   object("link", of[*inbox.EmailOpportunityLink](), "thread", of[threadSummary]()),
	"unlink_email_opportunity": object("thread", of[threadSummary]()),

	// Notifications and messaging
	"subscribe_opportunity":   of[outbox.Subscription](),
	"unsubscribe_opportunity": of[outbox.Subscription](),
	"list_subscriptions":      list[notify.SubscriptionView]("subscriptions"),
	"list_notifications":      list[outbox.Notification]("notifications"),
	"mark_notifications_read": object("marked", of[[]string](), "count", of[int]()),
	"send_slack_message":      of[notify.Message](),
	"ask_slack":               object("question_id", of[string](), "question", of[*notify.Message]()),
	"get_slack_answer": object("question_id", of[string](), "question", of[string](), "answered", of[bool](),
		"status", of[string](), "answers", of[[]notify.Answer]()),
	"list_questions": list[notify.Message]("questions"),
	// Pitches
	"create_pitch": of[pitches.Pitch](), "get_pitch": of[pitches.Pitch](), "list_pitches": list[pitches.Pitch]("pitches"),
	"update_pitch": of[pitches.Pitch](), "approve_pitch": of[pitches.Pitch](), "send_pitch": of[pitches.Pitch](),
	"cancel_pitch": of[pitches.Pitch](), "archive_pitch": of[pitches.Pitch](),
	"add_suppression": of[pitches.Suppression](), "remove_suppression": of[pitches.Suppression](),
	"list_suppressions":      list[pitches.Suppression]("suppressions"),
	"request_pitch_approval": of[pitchApprovalRequest](), "check_pitch_approval": of[pitchApprovalCheck](),
}

// campaignWithHeadline is a campaign as list_campaigns shows it.
type campaignWithHeadline struct {
	pipeline.Campaign
	Headline *pipeline.CampaignHeadline `json:"headline"`
}

// withOutputs sets every tool's output schema.
func withOutputs(tools []Tool) []Tool {
	for i := range tools {
		s := outputs[tools[i].Def.Name]
		if s == nil {
			s = &jsonschema.Schema{Type: "object"}
		}
		switch {
		case tools[i].kind.readOnly():
			tools[i].Def.OutputSchema = compact(s, outputDepth)
		case s.Properties["id"] != nil:
			tools[i].Def.OutputSchema = written(s)
		default:
			tools[i].Def.OutputSchema = compact(s, 1)
		}
	}
	return tools
}

// schemaTypes are types whose JSON the inference cannot see: a BSON date
// is written as an RFC 3339 string, a BSON document as an object or null.
var schemaTypes = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[bson.DateTime](): {Type: "string"},
	reflect.TypeFor[time.Time]():     {Type: "string"},
	reflect.TypeFor[bson.M]():        {Types: []string{"null", "object"}},
	reflect.TypeFor[repo.Secret]():   {Type: "string"},
}

// of is the schema of T's JSON.
func of[T any]() *jsonschema.Schema {
	s, err := jsonschema.ForType(reflect.TypeFor[T](), &jsonschema.ForOptions{TypeSchemas: schemaTypes})
	if err != nil {
		panic(fmt.Sprintf("output schema of %v: %v", reflect.TypeFor[T](), err))
	}
	nullableMaps(s)
	return s
}

// nullableMaps lets every map be null, as encoding/json writes a nil map.
func nullableMaps(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	isFalse := s.AdditionalProperties != nil && s.AdditionalProperties.Not != nil
	if s.Type == "object" && s.Properties == nil && s.AdditionalProperties != nil && !isFalse {
		s.Types, s.Type = []string{"null", "object"}, ""
	}
	for _, p := range s.Properties {
		nullableMaps(p)
	}
	nullableMaps(s.Items)
	if !isFalse {
		nullableMaps(s.AdditionalProperties)
	}
}

// list is the schema of the list envelope (see envelope): the page's items
// under noun, with total, showing, limit and offset.
func list[T any](noun string) *jsonschema.Schema {
	return object("total", of[int64](), "showing", of[int](), "limit", of[int](), "offset", of[int](), noun, of[[]T]())
}

// object is the schema of a JSON object with exactly the given properties
// (name, schema pairs), all of them always present.
// optional adds a property an object may leave out.
func optional(s *jsonschema.Schema, name string, p *jsonschema.Schema) *jsonschema.Schema {
	s.Properties[name] = p
	s.PropertyOrder = append(s.PropertyOrder, name)
	return s
}

func object(pairs ...any) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	for i := 0; i < len(pairs); i += 2 {
		name := pairs[i].(string)
		s.Properties[name] = pairs[i+1].(*jsonschema.Schema)
		s.Required = append(s.Required, name)
		s.PropertyOrder = append(s.PropertyOrder, name)
	}
	return s
}
