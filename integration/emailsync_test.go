package integration

import (
	"encoding/base64"
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
