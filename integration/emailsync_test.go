package integration

import (
	"encoding/base64"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/mailsync"
	"outreach/mailsync/imaptest"
)

// Defect: display names were dropped from from, to and cc. A stored message
// keeps each as a mail header writes it, the name decoded (RFC 2047) and
// quoted where the grammar needs it, whether it came by import or by sync.
func TestEmailKeepsDisplayNames(t *testing.T) {
	imap := imaptest.Start(t)
	env := testenv.NewWith(t, testenv.Options{Mail: &mailsync.Config{Addr: imap.Addr, Security: mailsync.SecurityPlain, User: imap.User, Password: imap.Password}})
	c := env.Client(env.AdminKey, "display-names")
	mk(t, c, "create_contact", M{"first_name": "Jürgen", "last_name": "Bläser", "email": "juergen@zeitung.example"})
	imported := crlf(`
Message-ID: <dn1@zeitung.example>
From: =?utf-8?q?J=C3=BCrgen_Bl=C3=A4ser?= <Juergen@Zeitung.example>
To: "Press Team" <team@pr.example>, plain@pr.example
Cc: "Doe, Jane" <jane@pr.example>
Subject: Interview
Date: Mon, 2 Mar 2026 09:00:00 +0000

Gerne.
`)
	synced := crlf(`
Message-ID: <dn2@pr.example>
In-Reply-To: <dn1@zeitung.example>
From: =?iso-8859-1?q?Press_Team?= <team@pr.example>
To: =?utf-8?b?SsO8cmdlbiBCbMOkc2Vy?= <juergen@zeitung.example>
Subject: Re: Interview
Date: Mon, 2 Mar 2026 10:00:00 +0000

Danke!
`)
	var imp struct {
		ThreadID string `json:"thread_id"`
	}
	c.Must("import_email", M{"raw_base64": base64.StdEncoding.EncodeToString(imported)}, &imp)
	imap.Append("INBOX", synced)
	var r syncResult
	c.Must("sync_emails", M{}, &r)
	if r.Stored != 1 {
		t.Fatalf("sync: %+v; want 1 stored", r)
	}
	type addrs struct {
		From string   `json:"from"`
		To   []string `json:"to"`
		Cc   []string `json:"cc"`
	}
	var th struct {
		Messages []addrs `json:"messages"`
	}
	c.Must("get_email_thread", M{"id": imp.ThreadID}, &th)
	want := []addrs{
		{From: "Jürgen Bläser <juergen@zeitung.example>", To: []string{"Press Team <team@pr.example>", "plain@pr.example"}, Cc: []string{`"Doe, Jane" <jane@pr.example>`}},
		{From: "Press Team <team@pr.example>", To: []string{"Jürgen Bläser <juergen@zeitung.example>"}},
	}
	if diff := cmp.Diff(th.Messages, want); diff != "" {
		t.Errorf("thread messages' addresses (-got +want):\n%s", diff)
	}
	// The sender's name is searchable like the rest of the sender.
	var found struct {
		Total int `json:"total"`
	}
	c.Must("search_emails", M{"query": "Bläser"}, &found)
	if found.Total != 1 {
		t.Errorf("search_emails Bläser: %d messages; want 1 (from Jürgen Bläser)", found.Total)
	}
}

// heldStatus is get_sync_status's answer.
type heldStatus struct {
	Mailboxes []struct {
		Mailbox string `json:"mailbox"`
		LastUID int64  `json:"last_uid"`
	} `json:"mailboxes"`
	HeldTotal int            `json:"held_total"`
	ByReason  map[string]int `json:"held_by_reason"`
	Held      []struct {
		Mailbox   string   `json:"mailbox"`
		UID       int64    `json:"uid"`
		Reason    string   `json:"reason"`
		Detail    string   `json:"detail"`
		MessageID string   `json:"message_id"`
		From      string   `json:"from"`
		To        []string `json:"to"`
		Subject   string   `json:"subject"`
	} `json:"held"`
}

// Defects: a sync's problems were visible only in that sync's answer (an
// automatic sync logged counts only) and the mark moved past a failed
// message for good; messages skipped for want of a known contact were never
// read again once the contact was created. Every message not stored is now
// held where get_sync_status shows it (uid, mailbox, reason), with the
// headers of a skipped one and no body; every sync tries the failed ones
// again, and stores a skipped one once a contact holds its address; rescan
// reads the whole mailbox again.
func TestEmailSyncHoldsWhatItDoesNotStore(t *testing.T) {
	imap := imaptest.Start(t)
	env := testenv.NewWith(t, testenv.Options{Mail: &mailsync.Config{Addr: imap.Addr, Security: mailsync.SecurityPlain,
		User: imap.User, Password: imap.Password, MaxMessageBytes: 4 << 10}})
	c := env.Client(env.AdminKey, "held")
	mk(t, c, "create_contact", M{"first_name": "Jane", "last_name": "Doe", "email": "jane@planet.example"})
	imap.Append("INBOX",
		mail("h1@planet.example", "jane@planet.example", "team@pr.example", "Hello", "Mon, 2 Mar 2026 09:00:00 +0000", "", "Hi."),                 // 1: stored
		mail("h2@new.example", "Nina Neu <nina@new.example>", "team@pr.example", "Pitch", "Mon, 2 Mar 2026 10:00:00 +0000", "", "A secret body."), // 2: no contact yet
		crlf("From jane\nnot a header\n\nx\n"), // 3: malformed
		mail("h4@planet.example", "jane@planet.example", "team@pr.example", "Big", "Mon, 2 Mar 2026 11:00:00 +0000", "", string(make([]byte, 8<<10))), // 4: too large
	)
	var r syncResult
	c.Must("sync_emails", M{}, &r)
	if r.Seen != 4 || r.Stored != 1 || r.Skipped != 1 || r.Failed != 2 || !r.Complete {
		t.Fatalf("first sync: %+v; want 4 seen, 1 stored, 1 skipped, 2 failed", r)
	}
	var st heldStatus
	c.Must("get_sync_status", M{}, &st)
	if len(st.Mailboxes) != 1 || st.Mailboxes[0].LastUID != 4 {
		t.Errorf("mailboxes: %+v; want INBOX marked at UID 4", st.Mailboxes)
	}
	type held struct {
		UID                     int64
		Reason, MessageID, From string
		To                      []string
		Subject                 string
	}
	var got []held
	for _, h := range st.Held {
		if h.Mailbox != "INBOX" || h.Detail == "" {
			t.Errorf("held %+v: want the mailbox and a detail", h)
		}
		got = append(got, held{h.UID, h.Reason, h.MessageID, h.From, h.To, h.Subject})
	}
	slices.SortFunc(got, func(a, b held) int { return int(a.UID - b.UID) })
	want := []held{
		{UID: 2, Reason: "no_contact", MessageID: "h2@new.example", From: "Nina Neu <nina@new.example>", To: []string{"team@pr.example"}, Subject: "Pitch"},
		{UID: 3, Reason: "malformed"},
		{UID: 4, Reason: "too_large"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("held messages (-got +want):\n%s", diff)
	}
	if st.HeldTotal != 3 || st.ByReason["no_contact"] != 1 || st.ByReason["malformed"] != 1 || st.ByReason["too_large"] != 1 {
		t.Errorf("held counts: %d %v", st.HeldTotal, st.ByReason)
	}
	c.Must("get_sync_status", M{"reason": "too_large"}, &st)
	if len(st.Held) != 1 || st.Held[0].UID != 4 {
		t.Errorf("held too_large: %+v", st.Held)
	}
	c.Fail("get_sync_status", M{"reason": "lost"}, "invalid_argument")

	// The next sync sees nothing new, tries the two failed messages again
	// (they still fail, and stay held as they were), and leaves the skipped
	// one: no contact holds its address yet.
	before := changeCount(t, c)
	c.Must("sync_emails", M{}, &r)
	if r.Seen != 0 || r.Retried != 2 || r.Recovered != 0 {
		t.Errorf("second sync: %+v; want nothing new, 2 retried, none recovered", r)
	}
	if n := changeCount(t, c) - before; n != 0 {
		t.Errorf("a retry that changed nothing wrote %d changes", n)
	}

	// Nina becomes a contact: the next sync stores her message, read again
	// from the mailbox, and it is no longer held.
	nina := mk(t, c, "create_contact", M{"first_name": "Nina", "last_name": "Neu", "email": "Nina@New.example"})
	c.Must("sync_emails", M{}, &r)
	if r.Seen != 0 || r.Retried != 3 || r.Recovered != 1 || r.Stored != 1 || len(r.ThreadIDs) != 1 {
		t.Fatalf("sync after the contact appeared: %+v; want 3 retried, 1 recovered and stored", r)
	}
	var emails struct {
		Messages []struct {
			MessageID string `json:"message_id"`
			BodyText  string `json:"body_text"`
		} `json:"messages"`
	}
	c.Must("get_contact_emails", M{"contact_id": nina}, &emails)
	if len(emails.Messages) != 1 || emails.Messages[0].MessageID != "h2@new.example" || emails.Messages[0].BodyText != "A secret body." {
		t.Errorf("Nina's emails: %+v", emails.Messages)
	}
	c.Must("get_sync_status", M{}, &st)
	if st.HeldTotal != 2 || st.ByReason["no_contact"] != 0 {
		t.Errorf("after Nina's message was stored: %d held %v; want the 2 failed", st.HeldTotal, st.ByReason)
	}

	// rescan reads every message again: stored ones are duplicates, and a
	// message skipped before (Omar's, appended now and synced while he was
	// unknown) is stored once he is a contact.
	imap.Append("INBOX", mail("h5@ledger.example", "omar@ledger.example", "team@pr.example", "Later", "Tue, 3 Mar 2026 09:00:00 +0000", "", "Hi again."))
	c.Must("sync_emails", M{}, &r)
	if r.Seen != 1 || r.Skipped != 1 {
		t.Fatalf("sync of Omar's message: %+v; want it skipped", r)
	}
	mk(t, c, "create_contact", M{"first_name": "Omar", "last_name": "Ali", "email": "omar@ledger.example"})
	c.Must("sync_emails", M{"rescan": true}, &r)
	if r.Seen != 5 || r.Stored != 1 || r.Duplicates != 2 || r.Failed != 2 || len(r.Mailboxes) != 1 || !r.Mailboxes[0].Rescanned || r.Mailboxes[0].LastUID != 5 {
		t.Errorf("rescan: %+v; want 5 seen, Omar's stored, 2 duplicates, the 2 failed again, the mark kept at 5", r)
	}
	c.Must("get_sync_status", M{}, &st)
	if st.HeldTotal != 2 || st.Mailboxes[0].LastUID != 5 {
		t.Errorf("after the rescan: %d held, mark %d; want 2 and 5", st.HeldTotal, st.Mailboxes[0].LastUID)
	}
}

// Defect: rolling back the session whose sync first created a mailbox's
// sync state archived that record, and the sync went on reading its mark
// from the archived record, so the messages the rollback took out were never
// read again. The state is a singleton: the rollback moves its mark back to
// the start and the record stays active; the next sync reads the mailbox
// again (the rolled-back message counts as stored, docs/known-limits.md, so
// it stays out of the threads) and moves the mark on, and verify finds the
// store clean throughout.
func TestRollbackOfTheFirstSyncMovesTheMarkBack(t *testing.T) {
	imap := imaptest.Start(t)
	env := testenv.NewWith(t, testenv.Options{Mail: &mailsync.Config{Addr: imap.Addr, Security: mailsync.SecurityPlain, User: imap.User, Password: imap.Password}})
	admin := env.Client(env.AdminKey, "setup")
	mk(t, admin, "create_contact", M{"first_name": "Ines", "last_name": "Roth", "email": "ines@daily.example"})
	imap.Append("INBOX", crlf(`
Message-ID: <rb1@daily.example>
From: Ines Roth <ines@daily.example>
To: team@pr.example
Subject: Embargo question
Date: Mon, 2 Mar 2026 09:00:00 +0000

When does it lift?
`))
	syncer := env.Client(env.AdminKey, "first-sync")
	var r syncResult
	syncer.Must("sync_emails", M{}, &r)
	if r.Stored != 1 {
		t.Fatalf("first sync: %+v; want 1 stored", r)
	}
	undo := env.Client(env.AdminKey, "undo-sync")
	undo.Must("rollback_session", M{"session_id": "first-sync"}, nil)
	verifyClean(t, env, "after rolling back the first sync")

	var st heldStatus
	undo.Must("get_sync_status", M{}, &st)
	if len(st.Mailboxes) != 1 || st.Mailboxes[0].LastUID != 0 {
		t.Fatalf("sync status after the rollback: %+v; want INBOX with its mark back at 0", st.Mailboxes)
	}
	var again syncResult
	undo.Must("sync_emails", M{}, &again)
	var threads struct {
		Total int `json:"total"`
	}
	undo.Must("list_email_threads", M{}, &threads)
	if threads.Total != 0 || again.Seen != 1 || again.Duplicates != 1 {
		t.Errorf("second sync: %+v, %d threads; want the message read again as a duplicate of the rolled-back one, no thread", again, threads.Total)
	}
	undo.Must("get_sync_status", M{}, &st)
	if len(st.Mailboxes) != 1 || st.Mailboxes[0].LastUID != 1 {
		t.Errorf("sync status after the second sync: %+v; want INBOX marked at UID 1", st.Mailboxes)
	}
	verifyClean(t, env, "after the second sync")
}
