package reports

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/pipeline"
)

// Shared reports: a report's figures frozen at the moment it was shared,
// shown to people without an assistant behind a signed, expiring, revocable
// link. The record (shared_reports) holds the snapshot, the expiry, the
// revocation and the views; the link is never stored: it is the record's id
// and expiry signed with the service's URL-signing secret (the one of the
// media URLs, held outside the store, repo/pipeline/media.go), under a label of its
// own, so whoever reads the store or a backup cannot forge one. The same
// link can be derived again for the team (list_shared_reports).

// Limits of a share link's life.
const (
	DefaultShareTTL = 30 * 24 * time.Hour
	MinShareTTL     = time.Hour
	MaxShareTTL     = 366 * 24 * time.Hour
	// SharePath is where the links point, under the service's base URL.
	SharePath = "/shared/"
	// snapshotClips is how many clips a snapshot keeps: the page lists the
	// highest reach first, as the HTML rendering does.
	snapshotClips = 100
)

// ReportQuery is a report of either kind over a scope and range.
type ReportQuery struct {
	Kind         string // coverage or pipeline
	Since, Until time.Time
	CampaignID   string
	OutletIDs    []string
	// NoClips leaves the clip list and the top outlets out (a chart that
	// does not draw them); the figures are the same.
	NoClips bool
}

// Snapshot is one computed report with what its pages print around it:
// the team's name and the scope in words.
type Snapshot struct {
	Kind      string          `json:"kind"`
	Team      string          `json:"team,omitempty"`
	ScopeName string          `json:"scope_name"`
	Coverage  *CoverageReport `json:"coverage,omitempty"`
	Pipeline  *PipelineReport `json:"pipeline,omitempty"`
	// Clips and TopOutlets carry the coverage report's lists, which its
	// JSON leaves out.
	Clips      []Clip        `json:"clips,omitempty"`
	TopOutlets []OutletReach `json:"top_outlets,omitempty"`
}

// Compute computes the report q asks for, with its clip list, and the words
// around it.
func (s *Store) Compute(ctx context.Context, q ReportQuery) (*Snapshot, error) {
	snap := &Snapshot{Kind: q.Kind}
	var err error
	switch q.Kind {
	case "coverage":
		snap.Coverage, err = s.CoverageReport(ctx, CoverageReportQuery{Since: q.Since, Until: q.Until, CampaignID: q.CampaignID, OutletIDs: q.OutletIDs, Clips: !q.NoClips})
		if err == nil {
			snap.Clips, snap.TopOutlets = snap.Coverage.Clips, snap.Coverage.TopOutlets
		}
	case "pipeline":
		if len(q.OutletIDs) > 0 {
			return nil, repo.Invalid("outlet_ids", "the pipeline report covers a campaign (campaign_id) or the whole team; outlet_ids is for the coverage report")
		}
		snap.Pipeline, err = s.PipelineReport(ctx, PipelineReportQuery{Since: q.Since, Until: q.Until, CampaignID: q.CampaignID})
	default:
		return nil, repo.Invalid("kind", "%q is not a report; use coverage or pipeline", q.Kind)
	}
	if err != nil {
		return nil, err
	}
	settings, err := s.Settings(ctx)
	if err != nil {
		return nil, err
	}
	snap.Team = settings.TeamName
	snap.ScopeName, err = s.scopeName(ctx, q)
	return snap, err
}

// scopeName names a report's scope in words.
func (s *Store) scopeName(ctx context.Context, q ReportQuery) (string, error) {
	switch {
	case q.CampaignID != "":
		c, err := pipeline.Of(s.Store).Campaign(ctx, q.CampaignID)
		if err != nil {
			return "", repo.WithField(err, "campaign_id")
		}
		return "Campaign: " + c.Name, nil
	case len(q.OutletIDs) > 0:
		var outlets []directory.Outlet
		if err := s.FindProjected(ctx, repo.CollOutlets, pipeline.ByIDs(pipeline.UniqueIDs(q.OutletIDs)), bson.M{"name": 1}, &outlets); err != nil {
			return "", err
		}
		names := make([]string, len(outlets))
		for i, o := range outlets {
			names[i] = o.Name
		}
		slices.Sort(names)
		return "Outlets: " + strings.Join(names, ", "), nil
	}
	return "The whole team", nil
}

// Restore puts the lists back on the report after a JSON round trip.
func (snap *Snapshot) Restore() {
	if snap.Coverage != nil {
		snap.Coverage.Clips, snap.Coverage.TopOutlets = snap.Clips, snap.TopOutlets
		if snap.Coverage.Clips == nil {
			snap.Coverage.Clips = []Clip{}
		}
	}
}

// SharedReport is a shared report's record.
type SharedReport struct {
	repo.Meta  `bson:",inline"`
	Kind       string     `bson:"kind" json:"kind"`
	Title      string     `bson:"title" json:"title"`
	Scope      ShareScope `bson:"scope" json:"scope"`
	SharedAt   time.Time  `bson:"shared_at" json:"shared_at"`
	ExpiresAt  time.Time  `bson:"expires_at" json:"expires_at"`
	SharedBy   string     `bson:"shared_by" json:"shared_by"` // user id
	RevokedAt  *time.Time `bson:"revoked_at" json:"revoked_at"`
	RevokedBy  string     `bson:"revoked_by,omitempty" json:"revoked_by,omitempty"`
	Views      int64      `bson:"views" json:"views"`
	LastViewAt *time.Time `bson:"last_viewed_at,omitempty" json:"last_viewed_at,omitempty"`
	// Snapshot is the report as computed at SharedAt, as JSON (Snapshot):
	// stored as text so that names used as keys (competitors, owners) need
	// no escaping in the store.
	Snapshot string `bson:"snapshot" json:"-"`
}

// ShareScope is what a shared report covers.
type ShareScope struct {
	Since      time.Time `bson:"since" json:"since"`
	Until      time.Time `bson:"until" json:"until"`
	CampaignID string    `bson:"campaign_id,omitempty" json:"campaign_id,omitempty"`
	OutletIDs  []string  `bson:"outlet_ids,omitempty" json:"outlet_ids,omitempty"`
	Name       string    `bson:"name" json:"name"`
}

// State says whether the link works: active, expired, revoked or archived
// (a rollback of its sharing).
func (r *SharedReport) State(now time.Time) string {
	switch {
	case r.ArchivedAt != nil:
		return "archived"
	case r.RevokedAt != nil:
		return "revoked"
	case !now.Before(r.ExpiresAt):
		return "expired"
	}
	return "active"
}

// LoadSnapshot decodes the snapshot.
func (r *SharedReport) LoadSnapshot() (*Snapshot, error) {
	snap := new(Snapshot)
	if err := json.Unmarshal([]byte(r.Snapshot), snap); err != nil {
		return nil, fmt.Errorf("shared report %s: snapshot: %w", r.ID, err)
	}
	snap.Restore()
	return snap, nil
}

// ShareReport computes the report q asks for, keeps it as a snapshot, and
// returns the record with its signed link under base, valid for ttl.
func (s *Store) ShareReport(ctx context.Context, q ReportQuery, ttl time.Duration, base string) (*SharedReport, repo.Secret, error) {
	if ttl < MinShareTTL || ttl > MaxShareTTL {
		return nil, repo.Secret{}, repo.Invalid("expires_in_days", "a link lives from 1 hour to 366 days; %s is outside", ttl)
	}
	snap, err := s.Compute(ctx, q)
	if err != nil {
		return nil, repo.Secret{}, err
	}
	// The snapshot keeps the clips the page lists (the highest reach
	// first); the figures count every clip.
	if len(snap.Clips) > snapshotClips {
		top := slices.Clone(snap.Clips)
		slices.SortStableFunc(top, func(a, b Clip) int {
			ra, rb := int64(-1), int64(-1)
			if a.Reach != nil {
				ra = *a.Reach
			}
			if b.Reach != nil {
				rb = *b.Reach
			}
			if ra != rb {
				if ra > rb {
					return -1
				}
				return 1
			}
			return b.PublishedAt.Compare(a.PublishedAt)
		})
		snap.Clips = top[:snapshotClips]
	}
	body, err := json.Marshal(snap)
	if err != nil {
		return nil, repo.Secret{}, err
	}
	now := repo.Now()
	actor, _ := audit.ActorFrom(ctx)
	title := "Coverage report"
	if q.Kind == "pipeline" {
		title = "Pipeline report"
	}
	r := &SharedReport{Meta: repo.Meta{ID: uuid.NewString()}, Kind: q.Kind, Title: title,
		Scope:    ShareScope{Since: q.Since, Until: q.Until, CampaignID: q.CampaignID, OutletIDs: pipeline.UniqueIDs(q.OutletIDs), Name: snap.ScopeName},
		SharedAt: now, ExpiresAt: now.Add(ttl).Truncate(time.Second), SharedBy: actor.UserID, Snapshot: string(body)}
	if len(r.Scope.OutletIDs) == 0 {
		r.Scope.OutletIDs = nil
	}
	if err := repo.Insert(ctx, s.Store, repo.CollSharedReports, r); err != nil {
		return nil, repo.Secret{}, err
	}
	link, err := s.ShareLink(ctx, base, r)
	return r, link, err
}

// ShareLink derives the signed link of r under base.
func (s *Store) ShareLink(ctx context.Context, base string, r *SharedReport) (repo.Secret, error) {
	key, err := s.SigningKey(ctx)
	if err != nil {
		return repo.Secret{}, err
	}
	exp := r.ExpiresAt.Unix()
	unsigned := fmt.Sprintf("%s%s%s?e=%d", strings.TrimRight(base, "/"), SharePath, r.ID, exp)
	return repo.NewSecret(unsigned+"&s="+shareSignature(key, r.ID, exp), unsigned), nil
}

func shareSignature(key []byte, id string, exp int64) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "outreach-report-share\n%s\n%d", id, exp)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Refusals of a share link.
var (
	ErrShareInvalid = &repo.Error{Code: repo.CodePermissionDenied, Message: "this link is not valid: its signature is missing, malformed or wrong"}
	ErrShareGone    = &repo.Error{Code: repo.CodeFailedPrecondition, Message: "this link has expired or was revoked; ask the team for a new one"}
)

// OpenShared checks a link's parts (id, e, s) and returns the shared report
// it opens: ErrShareInvalid for a forged or altered link (checked before the
// store is read), ErrShareGone for one expired, revoked or taken back.
func (s *Store) OpenShared(ctx context.Context, id, e, sig string) (*SharedReport, error) {
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || sig == "" || uuid.Validate(id) != nil {
		return nil, ErrShareInvalid
	}
	key, err := s.SigningKey(ctx)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal([]byte(sig), []byte(shareSignature(key, id, exp))) {
		return nil, ErrShareInvalid
	}
	now := time.Now()
	if now.Unix() >= exp {
		return nil, ErrShareGone
	}
	r, err := repo.Find[*SharedReport](ctx, s.Store, repo.CollSharedReports, id)
	if err != nil {
		if repo.ErrorCode(err) == repo.CodeNotFound {
			return nil, ErrShareGone
		}
		return nil, err
	}
	if r.ExpiresAt.Unix() != exp || r.State(now) != "active" {
		return nil, ErrShareGone
	}
	return r, nil
}

// CountView records one view of r: through the write path, as the system's
// "shared-report-view" (a reader of the link is nobody the service knows).
func (s *Store) CountView(ctx context.Context, id string) error {
	ctx = audit.WithActor(ctx, repo.SystemActor("shared-report-view"))
	_, err := repo.Modify(ctx, s.Store, repo.CollSharedReports, id, audit.ActionUpdate, func(r *SharedReport) error {
		r.Views++
		t := repo.Now()
		r.LastViewAt = &t
		return nil
	})
	return err
}

// ListSharedReports lists the shared reports, newest first: the active
// ones, or every one (expired and revoked too) with all.
func (s *Store) ListSharedReports(ctx context.Context, all bool, limit int) ([]SharedReport, error) {
	filter := bson.M{"archived_at": nil}
	if !all {
		filter["revoked_at"] = nil
		filter["expires_at"] = bson.M{"$gt": time.Now().UTC()}
	}
	out := []SharedReport{}
	opts := options.Find().SetSort(bson.D{{Key: "shared_at", Value: -1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)).SetProjection(bson.M{"snapshot": 0})
	if err := s.FindAll(ctx, repo.CollSharedReports, filter, opts, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RevokeSharedReport revokes a link: from now on it answers 410. Revoking
// a revoked link is refused (failed_precondition), so a retry says so.
func (s *Store) RevokeSharedReport(ctx context.Context, id string) (*SharedReport, error) {
	actor, _ := audit.ActorFrom(ctx)
	return repo.Modify(ctx, s.Store, repo.CollSharedReports, id, audit.ActionUpdate, func(r *SharedReport) error {
		switch {
		case r.ArchivedAt != nil:
			return repo.Errorf(repo.CodeFailedPrecondition, "shared report %s was taken back by a rollback; its link already answers 410", id)
		case r.RevokedAt != nil:
			return repo.Errorf(repo.CodeFailedPrecondition, "shared report %s was already revoked at %s", id, r.RevokedAt.Format(time.RFC3339))
		}
		t := repo.Now()
		r.RevokedAt, r.RevokedBy = &t, actor.UserID
		return nil
	})
}

// sharedRule: a rollback never re-arms a revoked link (revoking is how a
// team takes back what it sent; undoing it would silently reopen a link
// the team believes dead). Share the report again instead.
func sharedRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	if state["revoked_at"] != nil || state["archived_at"] != nil {
		return nil
	}
	stored, err := v.Stored(ctx, repo.CollSharedReports, id)
	if err != nil {
		return err
	}
	if stored != nil && stored["revoked_at"] != nil {
		return repo.Violated("shared_report_revoked", "the rollback would reopen the revoked share link %s; a rollback never re-arms a revoked link: call share_report again for a new one", id)
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollSharedReports, sharedRule) }

// ParseShareURL splits a share link into its parts, for tests and tools.
func ParseShareURL(link string) (id, e, sig string, err error) {
	u, err := url.Parse(link)
	if err != nil {
		return "", "", "", err
	}
	id, ok := strings.CutPrefix(u.Path, SharePath)
	if !ok {
		return "", "", "", errors.New("not a share link")
	}
	return id, u.Query().Get("e"), u.Query().Get("s"), nil
}

// Download URLs of renderings too large to answer inline (render_report):
// the rendering's arguments in the query, signed like a share link under a
// label of their own, valid for the media URLs' lifetime. Whoever holds one
// downloads that rendering, computed when fetched; nothing else.

// RenderPath is where download URLs point, under the service's base URL.
const RenderPath = "/reports/render"

// SignRenderURL returns the download URL of the rendering params describe,
// valid until exp. Its kept form leaves the signature out.
func (s *Store) SignRenderURL(ctx context.Context, base string, params url.Values, exp time.Time) (repo.Secret, error) {
	key, err := s.SigningKey(ctx)
	if err != nil {
		return repo.Secret{}, err
	}
	q := url.Values{}
	for k, v := range params {
		if k != "s" && k != "e" {
			q[k] = slices.Clone(v)
		}
	}
	q.Set("e", strconv.FormatInt(exp.Unix(), 10))
	unsigned := strings.TrimRight(base, "/") + RenderPath + "?" + q.Encode()
	return repo.NewSecret(unsigned+"&s="+renderSignature(key, q), unsigned), nil
}

func renderSignature(key []byte, q url.Values) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "outreach-report-render\n%s", q.Encode())
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// CheckRenderURL checks a download URL's query: ErrShareInvalid when the
// signature does not match, ErrShareGone past its expiry.
func (s *Store) CheckRenderURL(ctx context.Context, query url.Values) error {
	sig := query.Get("s")
	exp, err := strconv.ParseInt(query.Get("e"), 10, 64)
	if err != nil || sig == "" {
		return ErrShareInvalid
	}
	key, err := s.SigningKey(ctx)
	if err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range query {
		if k != "s" {
			q[k] = v
		}
	}
	if !hmac.Equal([]byte(sig), []byte(renderSignature(key, q))) {
		return ErrShareInvalid
	}
	if time.Now().Unix() >= exp {
		return ErrShareGone
	}
	return nil
}
