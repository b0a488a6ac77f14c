package directory

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
)

// Bulk import of contacts and outlets. Each row is matched on its natural
// key (a contact's email, case-insensitive; an outlet's website domain,
// without "www.") against the active records, and becomes a create, an
// update of the fields it gives, nothing (unchanged), or a refusal with the
// reason. The plan is computed once from the store as it is, without
// writing: a dry run returns it, a real run writes its mutations through the
// write path in batches (each batch all or nothing), all in the caller's
// session, so one rollback_session undoes the import. A field left out, null
// or empty is not changed: an import never clears a field, so running the
// same rows again changes nothing.

// Import statuses of a row.
const (
	ImportCreated   = "created"
	ImportUpdated   = "updated"
	ImportUnchanged = "unchanged"
	ImportRefused   = "refused"
)

// ImportBatch is how many records one write of an import holds.
const ImportBatch = 200

// MaxImportRows bounds the rows of one import call.
const MaxImportRows = 10_000

// ImportRow is one row as given: field name to value (JSON values, or the
// strings of a CSV row).
type ImportRow map[string]any

// ImportRowResult is what became (or, in a dry run, would become) of a row.
type ImportRowResult struct {
	// Row is the row's number, from 1 (for CSV, the line after the header).
	Row    int    `json:"row"`
	Key    string `json:"key,omitempty"`
	Status string `json:"status"`
	// ID is the record's id: the matched record, or the created one (a dry
	// run has no id for a row it would create).
	ID      string   `json:"id,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Field   string   `json:"field,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// ImportResult is the outcome of an import, row by row.
type ImportResult struct {
	DryRun    bool              `json:"dry_run"`
	Kind      string            `json:"kind"` // contact or outlet
	Total     int               `json:"total"`
	Created   int               `json:"created"`
	Updated   int               `json:"updated"`
	Unchanged int               `json:"unchanged"`
	Refused   int               `json:"refused"`
	Rows      []ImportRowResult `json:"rows"`
}

// Progress reports how many of total rows an import has handled.
type Progress func(done, total int, msg string)

// ContactFieldNames are the fields a contact import row may give.
var ContactFieldNames = []string{"first_name", "last_name", "email", "phone", "title", "bio", "is_freelance", "beats", "location", "timezone", "do_not_contact", "do_not_contact_reason", "owner_id"}

// OutletFieldNames are the fields an outlet import row may give.
var OutletFieldNames = []string{"name", "website", "type", "tier", "description", "country", "language", "topics", "audience_size"}

// rowReader reads typed values of one row; the first bad value is kept.
type rowReader struct {
	row   ImportRow
	field string
	err   string
}

func (r *rowReader) fail(field, format string, args ...any) {
	if r.err == "" {
		r.field, r.err = field, fmt.Sprintf(format, args...)
	}
}

// text returns the string of field, nil when absent, null or empty.
func (r *rowReader) text(field string) *string {
	v, ok := r.row[field]
	if !ok || v == nil {
		return nil
	}
	s, isStr := v.(string)
	if !isStr {
		switch n := v.(type) {
		case float64:
			s = strconv.FormatFloat(n, 'f', -1, 64)
		case bool:
			s = strconv.FormatBool(n)
		default:
			r.fail(field, "%s must be text", field)
			return nil
		}
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if len(s) > 100_000 {
		r.fail(field, "%s is longer than 100000 characters", field)
		return nil
	}
	return &s
}

func (r *rowReader) boolean(field string) *bool {
	v, ok := r.row[field]
	if b, isBool := v.(bool); ok && isBool {
		return &b
	}
	s := r.text(field)
	if s == nil {
		return nil
	}
	switch strings.ToLower(*s) {
	case "true", "yes", "1":
		b := true
		return &b
	case "false", "no", "0":
		b := false
		return &b
	}
	r.fail(field, "%s is %q; use true or false", field, *s)
	return nil
}

func (r *rowReader) integer(field string) *int64 {
	s := r.text(field)
	if s == nil {
		return nil
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(*s, "_", ""), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1e15 {
		r.fail(field, "%s is %q; give a whole number", field, *s)
		return nil
	}
	n := int64(f)
	return &n
}

// list reads a JSON array of strings, or text split on ";".
func (r *rowReader) list(field string) []string {
	v, ok := r.row[field]
	if !ok || v == nil {
		return nil
	}
	var out []string
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			s, isStr := e.(string)
			if !isStr {
				r.fail(field, "%s must be a list of text", field)
				return nil
			}
			out = append(out, s)
		}
	case string:
		for _, s := range strings.Split(x, ";") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	default:
		r.fail(field, "%s must be a list of text, or text separated by ;", field)
		return nil
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// unknown returns the first field of row not in allowed.
func unknownField(row ImportRow, allowed []string) string {
	var bad []string
	for k := range row {
		if !slices.Contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		return bad[0]
	}
	return ""
}

// importPlan is an import's result and the mutations a real run writes.
type importPlan struct {
	res  ImportResult
	muts []repo.Mutation
	// rowOf maps the index of a mutation to the index of its row result.
	rowOf []int
}

func (p *importPlan) refuse(res ImportRowResult, field, reason string) {
	res.Status, res.Field, res.Reason = ImportRefused, field, reason
	p.res.Rows = append(p.res.Rows, res)
}

func (p *importPlan) add(res ImportRowResult, m *repo.Mutation) {
	if m != nil {
		p.muts = append(p.muts, *m)
		p.rowOf = append(p.rowOf, len(p.res.Rows))
	}
	p.res.Rows = append(p.res.Rows, res)
}

// addUpdate plans the update of rec, read as raw: updated, or unchanged
// when no field differs.
func (p *importPlan) addUpdate(res ImportRowResult, coll string, raw bson.M, rec repo.Record) error {
	m, changed, err := updateMutation(coll, raw, rec)
	if err != nil {
		return err
	}
	res.Status, res.Changed = ImportUnchanged, changed
	if m != nil {
		res.Status = ImportUpdated
	}
	p.add(res, m)
	return nil
}

// addCreate plans the creation of rec; its id is shown on a real run only.
func addCreate[P interface {
	*T
	repo.Record
}, T any](p *importPlan, res ImportRowResult, coll string, rec P, dryRun bool) error {
	m, err := repo.Creation(coll, rec)
	if err != nil {
		return err
	}
	res.Status = ImportCreated
	if !dryRun {
		res.ID = repo.MetaOf(rec).ID
	}
	p.add(res, &m)
	return nil
}

// updateMutation is the mutation that stores rec changed from raw, or nil
// when nothing changed; it also returns the names of the changed fields.
func updateMutation(coll string, raw bson.M, rec repo.Record) (*repo.Mutation, []string, error) {
	before := ledger.Strip(raw)
	after, err := ledger.ToM(rec)
	if err != nil {
		return nil, nil, err
	}
	delete(after, "updated_at")
	cmp := ledger.Strip(before)
	delete(cmp, "updated_at")
	if ledger.SameState(cmp, after) {
		return nil, nil, nil
	}
	var changed []string
	for k, v := range after {
		if !ledger.SameState(bson.M{k: cmp[k]}, bson.M{k: v}) {
			changed = append(changed, k)
		}
	}
	for k := range cmp {
		if _, ok := after[k]; !ok {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)
	m := repo.MetaOf(rec)
	m.UpdatedAt = repo.Now()
	after["updated_at"] = m.UpdatedAt
	return &repo.Mutation{Coll: coll, ID: m.ID, Action: audit.ActionUpdate, Before: before, After: after, Version: m.Version}, changed, nil
}

// userIDs returns the ids of the active team members.
func (s *Store) userIDs(ctx context.Context) ([]string, error) {
	var users []struct {
		ID string `bson:"_id"`
	}
	if err := s.FindProjected(ctx, repo.CollUsers, bson.M{"archived_at": nil}, bson.M{"_id": 1}, &users); err != nil {
		return nil, err
	}
	out := make([]string, len(users))
	for i, u := range users {
		out[i] = u.ID
	}
	return out, nil
}

// ImportContacts imports contact rows, matched on email.
func (s *Store) ImportContacts(ctx context.Context, rows []ImportRow, dryRun bool, progress Progress) (*ImportResult, error) {
	if len(rows) > MaxImportRows {
		return nil, repo.Invalid("rows", "has %d rows; at most %d are imported in one call: split the file", len(rows), MaxImportRows)
	}
	// One read of the active contacts with an address, matched in Go: a
	// long $in is a scan per value on the embedded store.
	var existing []bson.M
	if err := s.FindAll(ctx, repo.CollContacts, bson.M{"archived_at": nil, "email_lower": bson.M{"$exists": true}}, nil, &existing); err != nil {
		return nil, err
	}
	byEmail := map[string]bson.M{}
	for _, d := range existing {
		if e := repo.Str(d, "email_lower"); e != "" {
			byEmail[e] = d
		}
	}
	users, err := s.userIDs(ctx)
	if err != nil {
		return nil, err
	}
	p := &importPlan{res: ImportResult{DryRun: dryRun, Kind: "contact", Total: len(rows), Rows: make([]ImportRowResult, 0, len(rows))}}
	seen := map[string]int{}
	for i, row := range rows {
		res := ImportRowResult{Row: i + 1}
		if f := unknownField(row, ContactFieldNames); f != "" {
			p.refuse(res, f, fmt.Sprintf("unknown field %q; a contact row takes: %s", f, strings.Join(ContactFieldNames, ", ")))
			continue
		}
		r := &rowReader{row: row}
		f := ContactFields{FirstName: r.text("first_name"), LastName: r.text("last_name"), Email: r.text("email"), Phone: r.text("phone"),
			Title: r.text("title"), Bio: r.text("bio"), IsFreelance: r.boolean("is_freelance"), Beats: r.list("beats"),
			Location: r.text("location"), Timezone: r.text("timezone"), DoNotContact: r.boolean("do_not_contact"),
			DoNotContactReason: r.text("do_not_contact_reason"), OwnerID: r.text("owner_id")}
		if r.err != "" {
			p.refuse(res, r.field, r.err)
			continue
		}
		if f.Email == nil {
			p.refuse(res, "email", "email is missing: an import matches contacts on their email address; add it, or create this contact with create_contact")
			continue
		}
		email, err := checkEmail(*f.Email)
		if err != nil {
			p.refuse(res, "email", repo.AsError(err).Message)
			continue
		}
		key := strings.ToLower(email)
		res.Key = key
		if first, dup := seen[key]; dup {
			p.refuse(res, "email", fmt.Sprintf("duplicate of row %d (same email %s); merge the two rows", first, key))
			continue
		}
		seen[key] = i + 1
		if f.OwnerID != nil && !slices.Contains(users, strings.ToLower(*f.OwnerID)) {
			p.refuse(res, "owner_id", fmt.Sprintf("owner_id %s is not a team member (see list_users)", *f.OwnerID))
			continue
		}
		if raw, ok := byEmail[key]; ok {
			c := &Contact{}
			if err := ledger.DecodeM(raw, c); err != nil {
				return nil, err
			}
			was := *c
			res.ID = c.ID
			// The row matched ignoring case: its address is this contact's,
			// and the case it is written in is not a change (a CRM export
			// that lower-cases every address updates nothing).
			if strings.EqualFold(strings.TrimSpace(c.Email), email) {
				f.Email = nil
			}
			if err := f.apply(c, false); err != nil {
				p.refuse(res, repo.AsError(err).Field, repo.AsError(err).Message)
				continue
			}
			if g := contactFlagGuard(ctx, &was, c); g != nil {
				p.refuse(res, g.Field, g.Message)
				continue
			}
			if err := p.addUpdate(res, repo.CollContacts, raw, c); err != nil {
				return nil, err
			}
			continue
		}
		c := &Contact{}
		if err := f.apply(c, true); err != nil {
			p.refuse(res, repo.AsError(err).Field, repo.AsError(err).Message)
			continue
		}
		if err := addCreate(p, res, repo.CollContacts, c, dryRun); err != nil {
			return nil, err
		}
	}
	return s.runImport(ctx, p, progress)
}

// websiteDomain is the natural key of an outlet: its website's host, lower
// case, without a leading "www.". A website without a scheme is read as
// https.
func websiteDomain(website string) string {
	w := strings.TrimSpace(website)
	if w == "" {
		return ""
	}
	if !strings.Contains(w, "://") {
		w = "https://" + w
	}
	u, err := url.Parse(w)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	return strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
}

// ImportOutlets imports outlet rows, matched on the website's domain.
func (s *Store) ImportOutlets(ctx context.Context, rows []ImportRow, dryRun bool, progress Progress) (*ImportResult, error) {
	if len(rows) > MaxImportRows {
		return nil, repo.Invalid("rows", "has %d rows; at most %d are imported in one call: split the file", len(rows), MaxImportRows)
	}
	var existing []bson.M
	if err := s.FindAll(ctx, repo.CollOutlets, bson.M{"archived_at": nil, "website": bson.M{"$exists": true, "$ne": ""}}, nil, &existing); err != nil {
		return nil, err
	}
	byDomain := map[string]bson.M{}
	for _, d := range existing {
		dom := websiteDomain(repo.Str(d, "website"))
		if prev, ok := byDomain[dom]; dom != "" && (!ok || repo.Str(d, "_id") < repo.Str(prev, "_id")) {
			byDomain[dom] = d // several outlets on one domain: the same one every time
		}
	}
	p := &importPlan{res: ImportResult{DryRun: dryRun, Kind: "outlet", Total: len(rows), Rows: make([]ImportRowResult, 0, len(rows))}}
	seen := map[string]int{}
	for i, row := range rows {
		res := ImportRowResult{Row: i + 1}
		if f := unknownField(row, OutletFieldNames); f != "" {
			p.refuse(res, f, fmt.Sprintf("unknown field %q; an outlet row takes: %s", f, strings.Join(OutletFieldNames, ", ")))
			continue
		}
		r := &rowReader{row: row}
		f := OutletFields{Name: r.text("name"), Type: r.text("type"), Website: r.text("website"), Description: r.text("description"),
			Country: r.text("country"), Language: r.text("language"), Topics: r.list("topics"), AudienceSize: r.integer("audience_size")}
		if t := r.integer("tier"); t != nil {
			n := int(*t)
			if n == 0 {
				n = -1 // an import never clears: 0 is out of range here
			}
			f.Tier = &n
		}
		if r.err != "" {
			p.refuse(res, r.field, r.err)
			continue
		}
		if f.Website == nil {
			p.refuse(res, "website", "website is missing: an import matches outlets on their website's domain; add it, or create this outlet with create_outlet")
			continue
		}
		if !strings.Contains(*f.Website, "://") {
			w := "https://" + *f.Website
			f.Website = &w
		}
		key := websiteDomain(*f.Website)
		if key == "" {
			p.refuse(res, "website", fmt.Sprintf("website %q has no domain; give a URL such as https://example.com", *f.Website))
			continue
		}
		res.Key = key
		if first, dup := seen[key]; dup {
			p.refuse(res, "website", fmt.Sprintf("duplicate of row %d (same domain %s); merge the two rows", first, key))
			continue
		}
		seen[key] = i + 1
		if raw, ok := byDomain[key]; ok {
			o := &Outlet{}
			if err := ledger.DecodeM(raw, o); err != nil {
				return nil, err
			}
			res.ID = o.ID
			if websiteDomain(o.Website) == key {
				f.Website = nil // the same site: keep the stored URL as it is
			}
			if err := f.apply(o, false); err != nil {
				p.refuse(res, repo.AsError(err).Field, repo.AsError(err).Message)
				continue
			}
			if err := p.addUpdate(res, repo.CollOutlets, raw, o); err != nil {
				return nil, err
			}
			continue
		}
		o := &Outlet{}
		if err := f.apply(o, true); err != nil {
			p.refuse(res, repo.AsError(err).Field, repo.AsError(err).Message)
			continue
		}
		if err := addCreate(p, res, repo.CollOutlets, o, dryRun); err != nil {
			return nil, err
		}
	}
	return s.runImport(ctx, p, progress)
}

// runImport counts the plan's rows and, unless it is a dry run, writes its
// mutations in batches, reporting progress after each.
func (s *Store) runImport(ctx context.Context, p *importPlan, progress Progress) (*ImportResult, error) {
	for _, r := range p.res.Rows {
		switch r.Status {
		case ImportCreated:
			p.res.Created++
		case ImportUpdated:
			p.res.Updated++
		case ImportUnchanged:
			p.res.Unchanged++
		case ImportRefused:
			p.res.Refused++
		}
	}
	if progress == nil {
		progress = func(int, int, string) {}
	}
	total := len(p.res.Rows)
	if p.res.DryRun || len(p.muts) == 0 {
		progress(total, total, "planned")
		return &p.res, nil
	}
	for start := 0; start < len(p.muts); start += ImportBatch {
		end := min(start+ImportBatch, len(p.muts))
		if _, err := s.Write(ctx, p.muts[start:end]...); err != nil {
			if start == 0 {
				return nil, err
			}
			e := repo.AsError(err)
			return nil, &repo.Error{Code: e.Code, Retryable: e.Retryable, Message: fmt.Sprintf(
				"the import stopped after %d of %d records (rows up to %d are written, in this session: rollback_session undoes them, or run the same import again to finish it): %s",
				start, len(p.muts), p.res.Rows[p.rowOf[start-1]].Row, e.Message)}
		}
		done := total
		if end < len(p.muts) {
			done = p.res.Rows[p.rowOf[end]].Row - 1
		}
		progress(done, total, fmt.Sprintf("%d of %d records written", end, len(p.muts)))
	}
	return &p.res, nil
}
