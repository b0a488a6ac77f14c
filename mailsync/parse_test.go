package mailsync

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"outreach/repo/inbox"
)

// TestParse reads awkward messages with the MIME library and checks what a
// thread would store of each.
func TestParse(t *testing.T) {
	fallback := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	tests := []struct {
		name string
		raw  string
		want inbox.IncomingEmail
	}{
		{"quoted-printable with an encoded subject and display names", crlf(`Message-ID: <m1@pr.example>
From: "Team" <team@pr.example>
To: =?utf-8?Q?Jos=C3=A9?= <Jose@Planet.example>, other@x.example
Cc: c@x.example
Subject: =?UTF-8?B?RW1iYXJnbzogY2Fmw6k=?=
Date: Mon, 2 Mar 2026 09:30:00 +0100
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Caf=C3=A9 at ten=3F
Line two
`), inbox.IncomingEmail{MessageID: "m1@pr.example", From: "team@pr.example", To: []string{"jose@planet.example", "other@x.example"}, Cc: []string{"c@x.example"},
			Names:   map[string]string{"jose@planet.example": "José", "team@pr.example": "Team"},
			Subject: "Embargo: café", Date: time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC), BodyText: "Café at ten?\nLine two"}},
		{"multipart/alternative prefers the text part; references kept", crlf(`Message-ID: <m2@planet.example>
In-Reply-To: <m1@pr.example>
References: <m0@pr.example> <m1@pr.example>
From: jose@planet.example
To: team@pr.example
Subject: Re: Embargo
Date: Tue, 3 Mar 2026 10:00:00 +0000
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="b1"

--b1
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

Gr=FC=DFe, yes.
--b1
Content-Type: text/html

<p>HTML version</p>
--b1--
`), inbox.IncomingEmail{MessageID: "m2@planet.example", InReplyTo: "m1@pr.example", References: []string{"m0@pr.example", "m1@pr.example"},
			From: "jose@planet.example", To: []string{"team@pr.example"}, Subject: "Re: Embargo", Date: time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC), BodyText: "Grüße, yes."}},
		{"HTML only in windows-1252, an odd date, no Message-ID", crlf(`From: Omar <omar@ledger.example>
To: team@pr.example
Subject: =?ISO-8859-1?Q?Caf=E9_interview?=
Date: 2026-03-03 10:00:00
Content-Type: text/html; charset=windows-1252
Content-Transfer-Encoding: quoted-printable

<html><head><style>p{color:red}</style></head><body><p>Caf=E9 <b>time</b> =80</p><script>alert(1)</script><p>two</p></body></html>
`), inbox.IncomingEmail{MessageID: "<content key>", From: "omar@ledger.example", To: []string{"team@pr.example"}, Names: map[string]string{"omar@ledger.example": "Omar"}, Subject: "Café interview",
			Date: time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC), BodyText: "Café time €\n\ntwo"}},
		{"nested multiparts with base64 attachments and an RFC 2231 filename; unreadable date", crlf(`Message-ID: <m7@pr.example>
From: team@pr.example
To: jose@planet.example
Subject: Press kit
Date: sometime last week
Content-Type: multipart/mixed; boundary=outer

--outer
Content-Type: multipart/alternative; boundary=inner

--inner
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: base64

S2l0IGF0dGFjaGVkLg==
--inner
Content-Type: text/html; charset=utf-8

<p>Kit attached.</p>
--inner--
--outer
Content-Type: application/pdf
Content-Disposition: attachment; filename*=UTF-8''Press%20kit%20%C3%BC.pdf
Content-Transfer-Encoding: base64

JVBERi0xLjQK
--outer
Content-Type: image/png; name="logo.png"
Content-Transfer-Encoding: base64

iVBORw0KGgo=
--outer--
`), inbox.IncomingEmail{MessageID: "m7@pr.example", From: "team@pr.example", To: []string{"jose@planet.example"}, Subject: "Press kit", Date: fallback,
			BodyText: "Kit attached.", Attachments: []inbox.EmailAttachment{{Filename: "Press kit ü.pdf", MIMEType: "application/pdf", SizeBytes: 9}, {Filename: "logo.png", MIMEType: "image/png", SizeBytes: 8}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(strings.NewReader(tt.raw), parseOptions{fallbackDate: fallback})
			if err != nil {
				t.Fatal(err)
			}
			if tt.want.MessageID == "<content key>" {
				if !strings.HasPrefix(got.MessageID, "sha256-") {
					t.Errorf("message without Message-ID got key %q, want a content key", got.MessageID)
				}
				again, _ := parse(strings.NewReader(tt.raw), parseOptions{fallbackDate: fallback.Add(time.Hour)})
				if again.MessageID != got.MessageID {
					t.Errorf("content key is not stable: %q then %q", got.MessageID, again.MessageID)
				}
				tt.want.MessageID = got.MessageID
			}
			if diff := cmp.Diff(got, &tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
	}
}

// TestParseMalformed: what the MIME library cannot read is reported as
// malformed, never half-stored.
func TestParseMalformed(t *testing.T) {
	for name, raw := range map[string]string{
		"header line without a colon": "From jane@planet.example\r\nThis is not a header\r\n\r\nbody",
		"binary garbage":              "\x00\x01\x02 garbage",
		"multipart without boundary":  "From: a@b.example\r\nContent-Type: multipart/mixed\r\n\r\nno boundary",
		"multipart never closed":      "From: a@b.example\r\nContent-Type: multipart/mixed; boundary=xyz\r\n\r\n--xyz\r\nContent-Type: text/plain\r\n\r\nhello\r\n",
		"base64 that is not":          "From: a@b.example\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!!not base64@@@\r\n",
	} {
		_, err := parse(strings.NewReader(raw), parseOptions{})
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestSubjectKey(t *testing.T) {
	for in, want := range map[string]string{
		"Re: Launch":               "launch",
		"RE: Fwd: AW: WG:  Launch": "launch",
		"Re[2]: Launch  plan":      "launch plan",
		"SV: Launch":               "launch",
		"Launch":                   "launch",
		"Reply about launch":       "reply about launch",
	} {
		if got := inbox.SubjectKey(in); got != want {
			t.Errorf("SubjectKey(%q) = %q, want %q", in, got, want)
		}
	}
}
