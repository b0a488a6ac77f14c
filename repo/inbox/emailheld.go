package inbox

import (
	"context"
	"fmt"
	"net/mail"
	"outreach/repo"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
)

// This file keeps the messages of the shared inbox that a sync read but did
// not store: skipped for want of a known contact (their headers only, no
// body, so a contact created later can claim them), or failed (too large,
// malformed, refused by the store). The sync's mark moves past them because
// they are kept here, and every sync tries them again: a failed message
// each time, a skipped one once a contact holds one of its addresses.

// Reasons a message is held.
const (
	HeldNoContact   = "no_contact"
	HeldTooLarge    = "too_large"
	HeldMalformed   = "malformed"
	HeldStoreFailed = "store_failed"
)

// HeldReasons are the reasons a message is held, in the order
// get_sync_status lists their counts.
var HeldReasons = []string{HeldNoContact, HeldTooLarge, HeldMalformed, HeldStoreFailed}

// Outcomes of a held message once it is no longer held.
const (
	HeldStored    = "stored"    // stored by a later sync
	HeldDuplicate = "duplicate" // found stored (imported meanwhile)
	HeldGone      = "gone"      // no longer in the mailbox, or the mailbox's UIDVALIDITY changed
)

// HeldEmail is a message of a synced mailbox that is not stored, and why.
// Its id is a function of the account, mailbox, UIDVALIDITY and UID, so a
// message is held once however often it is read.
type HeldEmail struct {
	repo.Meta   `bson:",inline"`
	Account     string `bson:"account" json:"account"`
	Mailbox     string `bson:"mailbox" json:"mailbox"`
	UIDValidity int64  `bson:"uid_validity" json:"uid_validity"`
	UID         int64  `bson:"uid" json:"uid"`
	// Reason: no_contact, too_large, malformed or store_failed.
	Reason string `bson:"reason" json:"reason"`
	Detail string `bson:"detail" json:"detail"`
	// The headers read, when they could be (no body is kept).
	MessageID string     `bson:"message_id,omitempty" json:"message_id,omitempty"`
	From      string     `bson:"from,omitempty" json:"from,omitempty"`
	To        []string   `bson:"to,omitempty" json:"to,omitempty"`
	Cc        []string   `bson:"cc,omitempty" json:"cc,omitempty"`
	Subject   string     `bson:"subject,omitempty" json:"subject,omitempty"`
	Date      *time.Time `bson:"date,omitempty" json:"date,omitempty"`
	SizeBytes int64      `bson:"size_bytes,omitempty" json:"size_bytes,omitempty"`
	// ResolvedAt is set when the message is no longer held; Outcome says why
	// (stored, duplicate, gone).
	ResolvedAt *time.Time `bson:"resolved_at" json:"resolved_at"`
	Outcome    string     `bson:"outcome,omitempty" json:"outcome,omitempty"`
}

var heldSpace = uuid.MustParse("9a4c1e2b-7f3d-4b8a-a6e5-1c2d3e4f5a6b")

// HeldEmailID is the id of the held record of one message.
func HeldEmailID(account, mailbox string, uidValidity, uid int64) string {
	return uuid.NewSHA1(heldSpace, []byte(fmt.Sprintf("%s\x00%s\x00%d\x00%d", account, mailbox, uidValidity, uid))).String()
}

// HoldEmail records that a message is not stored, and why. A message held
// already is updated only when what is known of it changed, so a sync that
// retries a message in vain writes nothing.
func (s *Store) HoldEmail(ctx context.Context, h HeldEmail) error {
	h.ID = HeldEmailID(h.Account, h.Mailbox, h.UIDValidity, h.UID)
	h.To, h.Cc = noneIfEmpty(h.To), noneIfEmpty(h.Cc)
	if h.Date != nil {
		d := h.Date.UTC().Truncate(time.Millisecond)
		h.Date = &d
	}
	for attempt := 0; attempt < 3; attempt++ {
		_, err := repo.Modify(ctx, s.Store, repo.CollHeld, h.ID, audit.ActionUpdate, func(cur *HeldEmail) error {
			// Held again after a rollback archived it: it is held, as it was.
			cur.Reason, cur.Detail, cur.ResolvedAt, cur.Outcome, cur.ArchivedAt = h.Reason, h.Detail, nil, "", nil
			if h.MessageID != "" || h.From != "" {
				cur.MessageID, cur.From, cur.To, cur.Cc, cur.Subject, cur.Date = h.MessageID, h.From, h.To, h.Cc, h.Subject, h.Date
			}
			if h.SizeBytes != 0 {
				cur.SizeBytes = h.SizeBytes
			}
			return nil
		})
		if !repo.IsNotFound(err) {
			return err
		}
		fresh := h
		fresh.ResolvedAt, fresh.Outcome = nil, ""
		err = repo.Insert(ctx, s.Store, repo.CollHeld, &fresh)
		if ledger.IsConflict(err) {
			continue // held by another sync meanwhile: update that one
		}
		return err
	}
	return repo.ErrConflict
}

// ResolveHeldEmail records that a held message is no longer held: outcome
// is stored, duplicate or gone. A message not held is left alone.
func (s *Store) ResolveHeldEmail(ctx context.Context, account, mailbox string, uidValidity, uid int64, outcome string) error {
	_, err := repo.Modify(ctx, s.Store, repo.CollHeld, HeldEmailID(account, mailbox, uidValidity, uid), audit.ActionUpdate, func(h *HeldEmail) error {
		if h.ResolvedAt == nil {
			t := repo.Now()
			h.ResolvedAt, h.Outcome = &t, outcome
		}
		return nil
	})
	if repo.IsNotFound(err) {
		return nil
	}
	return err
}

// HeldEmails returns the messages of one mailbox of one account still held,
// by UID. A held record archived (by the rollback of the sync that made it)
// is not held: its message is read again, since the rollback moved the mark
// back too.
func (s *Store) HeldEmails(ctx context.Context, account, mailbox string) ([]HeldEmail, error) {
	var out []HeldEmail
	err := s.FindAll(ctx, repo.CollHeld, bson.M{"account": account, "mailbox": mailbox, "resolved_at": nil, "archived_at": nil},
		options.Find().SetSort(bson.D{{Key: "uid_validity", Value: 1}, {Key: "uid", Value: 1}}), &out)
	if err != nil {
		return nil, ledger.DriverErr(err, repo.KindOf(repo.CollHeld), "query")
	}
	return out, nil
}

// ClaimableHeld returns which of held (messages skipped for want of a
// known contact) now have an active contact among their addresses.
func (s *Store) ClaimableHeld(ctx context.Context, held []HeldEmail) ([]HeldEmail, error) {
	var addrs []string
	for _, h := range held {
		if h.Reason == HeldNoContact {
			addrs = append(addrs, heldAddresses(h)...)
		}
	}
	known := map[string]string{}
	for start := 0; start < len(addrs); start += 500 {
		m, err := s.contactsByAddress(ctx, addrs[start:min(start+500, len(addrs))])
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			known[k] = v
		}
	}
	var out []HeldEmail
	for _, h := range held {
		if h.Reason == HeldNoContact && slices.ContainsFunc(heldAddresses(h), func(a string) bool { _, ok := known[a]; return ok }) {
			out = append(out, h)
		}
	}
	return out, nil
}

func heldAddresses(h HeldEmail) []string {
	var out []string
	for _, a := range slices.Concat([]string{h.From}, h.To, h.Cc) {
		if a = BareAddress(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// SyncStatus is where the sync of the shared inbox stands: each mailbox's
// mark, and the messages held (not stored), with their reasons.
type SyncStatus struct {
	Mailboxes []EmailSyncState `json:"mailboxes"`
	// HeldTotal counts the messages held; ByReason counts them by reason.
	HeldTotal int            `json:"held_total"`
	ByReason  map[string]int `json:"held_by_reason"`
	Showing   int            `json:"showing"`
	Limit     int            `json:"limit"`
	Offset    int            `json:"offset"`
	Held      []HeldEmail    `json:"held"`
}

// EmailSyncStatus returns the sync's status: every mailbox's mark, and a
// page of the messages held (of one reason, when given), newest first.
func (s *Store) EmailSyncStatus(ctx context.Context, reason string, limit, offset int) (*SyncStatus, error) {
	if reason != "" && !slices.Contains(HeldReasons, reason) {
		return nil, repo.Invalid("reason", "%q is not a reason a message is held; use one of: %s", reason, strings.Join(HeldReasons, ", "))
	}
	st := &SyncStatus{Mailboxes: []EmailSyncState{}, ByReason: map[string]int{}, Limit: limit, Offset: offset}
	if err := s.FindAll(ctx, repo.CollSettings, bson.M{"name": "email_sync"}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}), &st.Mailboxes); err != nil {
		return nil, ledger.DriverErr(err, "setting", "email sync state")
	}
	slices.SortFunc(st.Mailboxes, func(a, b EmailSyncState) int {
		return strings.Compare(a.Account+"\x00"+a.Mailbox, b.Account+"\x00"+b.Mailbox)
	})
	for _, r := range HeldReasons {
		n, err := s.Collection(repo.CollHeld).CountDocuments(ctx, bson.M{"resolved_at": nil, "archived_at": nil, "reason": r})
		if err != nil {
			return nil, ledger.DriverErr(err, repo.KindOf(repo.CollHeld), "count")
		}
		st.ByReason[r] = int(n)
		st.HeldTotal += int(n)
	}
	filter := bson.M{"resolved_at": nil, "archived_at": nil}
	if reason != "" {
		filter["reason"] = reason
	}
	p, err := repo.ListPage[HeldEmail](ctx, s.Store, repo.CollHeld, filter, bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}, limit, offset)
	if err != nil {
		return nil, err
	}
	st.Held, st.Showing = p.Items, len(p.Items)
	return st, nil
}

// BareAddress is the lower-case address of a From header ("Ann <a@x.org>" → "a@x.org").
func BareAddress(s string) string {
	if a, err := mail.ParseAddress(s); err == nil {
		return strings.ToLower(a.Address)
	}
	return strings.ToLower(strings.TrimSpace(s))
}
