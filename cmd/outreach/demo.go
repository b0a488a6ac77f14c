package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/inbox"
	"outreach/repo/notes"
	"outreach/repo/pipeline"
)

// The demo data: a small, realistic, fictional PR team's store, made through
// the write path like any agent's work, under the session "demo", so that
// rollback_session demo takes it all back. Every name is invented and every
// address is on an example domain (RFC 2606). It is the same on every run:
// the records' ids and the change log's times differ, their contents do not.

// DemoSession is the agent session the demo data is written under.
const DemoSession = "demo"

// demoActor is who writes the demo data.
func demoActor() audit.Actor {
	return audit.Actor{UserID: "system", AgentID: "outreach-demo", SessionID: DemoSession, Tool: "seed --demo"}
}

// demoBase is the fixed date the demo's history is told from.
var demoBase = time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)

func demoDay(n int) *time.Time {
	t := demoBase.AddDate(0, 0, n)
	return &t
}

type demoOutlet struct {
	name, typ, domain, country, description string
	tier                                    int
	audience                                int64
	topics                                  []string
	channels                                []demoChannel
}

type demoChannel struct{ typ, name, path, frequency string }

var demoOutlets = []demoOutlet{
	{"The Northwind Review", "publication", "northwind-review.example.com", "GB", "Long-form technology and business analysis.", 1, 1200000, []string{"technology", "business"},
		[]demoChannel{{"website", "Technology desk", "/technology", "daily"}}},
	{"Harbour City Ledger", "newspaper", "harbourledger.example.com", "US", "Daily regional newspaper with a strong business section.", 1, 850000, []string{"business", "local"},
		[]demoChannel{{"print", "Business section", "/business", "daily"}, {"website", "Ledger online", "/", "daily"}}},
	{"Circuit Monthly", "magazine", "circuitmonthly.example.org", "US", "Monthly magazine for IT leaders.", 2, 240000, []string{"enterprise software", "cloud"},
		[]demoChannel{{"print", "Circuit Monthly print edition", "/print", "monthly"}}},
	{"Byteline", "online", "byteline.example.net", "DE", "Fast-moving tech news site.", 2, 600000, []string{"startups", "ai"},
		[]demoChannel{{"website", "Byteline news", "/news", "daily"}, {"newsletter", "Byteline Daily Brief", "/brief", "daily"}}},
	{"Meridian Broadcasting", "broadcaster", "meridian-tv.example.com", "GB", "National broadcaster.", 1, 3000000, []string{"business", "policy"},
		[]demoChannel{{"tv_broadcast", "Evening Business Report", "/ebr", "daily"}}},
	{"Loudmouth Audio", "podcast_network", "loudmouth.example.org", "US", "Podcast network for builders and founders.", 2, 180000, []string{"startups", "open source"},
		[]demoChannel{{"podcast", "The Build", "/the-build", "weekly"}}},
	{"The Friday Stack", "newsletter", "fridaystack.example.net", "CA", "Weekly newsletter on developer tools.", 3, 45000, []string{"developer tools"},
		[]demoChannel{{"newsletter", "The Friday Stack", "/", "weekly"}}},
	{"Quiet Compute", "blog", "quietcompute.example.com", "NL", "An engineer's blog on efficient computing.", 3, 20000, []string{"climate tech", "cloud"},
		[]demoChannel{{"website", "Quiet Compute blog", "/posts", "monthly"}}},
	{"Continental Wire", "wire_service", "continentalwire.example.com", "FR", "International news wire.", 1, 5000000, []string{"business", "markets"},
		[]demoChannel{{"website", "Technology wire", "/tech", "daily"}}},
	{"Summit Works", "conference_organizer", "summitworks.example.org", "US", "Organises cloud and security conferences.", 2, 30000, []string{"cloud", "security"},
		[]demoChannel{{"event", "CloudSummit 2027", "/cloudsummit-2027", "annual"}}},
	{"Greenfield Innovation Awards", "award_body", "greenfield-awards.example.org", "GB", "Annual awards for sustainable innovation.", 3, 15000, []string{"climate tech"},
		[]demoChannel{{"award", "Innovation of the Year", "/innovation-of-the-year", "annual"}}},
	{"Civic Tech Forum", "other", "civictech.example.net", "IE", "Community forum on public-sector technology.", 3, 8000, []string{"policy", "public sector"},
		[]demoChannel{{"event", "Civic Tech Forum meetups", "/meetups", "quarterly"}}},
}

var demoFirst = []string{"Ada", "Bram", "Clara", "Dev", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas",
	"Kaito", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sami", "Tess",
	"Uma", "Viktor", "Wren", "Xavi", "Yara", "Zane", "Amira", "Boris", "Celia", "Dario",
	"Esme", "Felix", "Gwen", "Hamza", "Ivy", "Joel", "Kira", "Lior", "Mira", "Nico"}

var demoLast = []string{"Lindqvist", "Okafor", "Marchetti", "Raman", "Kaya", "Haddad", "Holm", "Moreau", "Duarte", "Weber",
	"Tanaka", "Novak", "Ruiz", "Petrov", "Berg", "Iyer", "Fallon", "Serrano", "Nieminen", "Quigley",
	"Banerjee", "Sokolov", "Ashby", "Ferrer", "Mansour", "Whitlock", "Nasser", "Ivanov", "Castell", "Greco",
	"Thorne", "Adler", "Pryce", "Aziz", "Calloway", "Sandoval", "Volkova", "Ben-David", "Okonkwo", "Fontaine"}

var demoBeats = []string{"cloud", "security", "ai", "startups", "enterprise software", "climate tech", "fintech", "devices", "policy", "open source"}

var demoRoles = []string{"reporter", "senior editor", "host", "columnist", "producer"}

// demoDoNotContact is the index of the one journalist who asked not to be pitched.
const demoDoNotContact = 13

var demoCampaigns = []struct{ name, status, description, goals string }{
	{"Aurora 3.0 launch", "active", "Launch of Aurora 3.0, the energy-aware cloud scheduler.", "Tier-1 coverage in technology and business press; two broadcast segments."},
	{"Series B announcement", "planning", "Announcing the Series B round and the new Lisbon office.", "Business and startup coverage; founder interviews and podcast appearances."},
}

var demoNotes = []struct{ typ, title, content string }{
	{"general", "Press kit sent", "Shared the press kit and the embargoed benchmark numbers."},
	{"meeting", "Briefing at the office", "Walked through the roadmap; interested in customer stories, not features."},
	{"phone_call", "Follow-up call", "Prefers calls before 11:00; will decide on the feature next week."},
	{"event", "Met at CloudSummit", "Spoke after the keynote; asked for an intro to our CTO."},
	{"research", "Coverage history", "Covered the last two launches of our competitors, both fairly critical."},
	{"other", "Holiday schedule", "Away for two weeks from the 20th; the desk editor covers."},
}

// demoPlan counts the writes seed --demo makes, for its progress bar.
func demoPlan() int {
	n := 0
	for _, o := range demoOutlets {
		n += 1 + len(o.channels)
	}
	n += len(demoFirst) + (len(demoFirst)+6)/7 // contacts, second affiliations of freelancers (every seventh)
	n += len(demoCampaigns) * (1 + len(pipeline.Stages))
	for k := range pipeline.Stages {
		n += len(demoCampaigns) * len(demoPath(k))
	}
	return n + 2*len(demoNotes) + 10 + 3 + 3*2 + 3 // notes, coverage, media, email messages, threads
}

// demoPath is the stages an opportunity moves through to reach Stages[k].
func demoPath(k int) []string {
	stage := pipeline.Stages[k]
	switch stage {
	case pipeline.StageLost:
		return []string{"drafting", "pitched", pipeline.StageLost}
	case pipeline.StageWon:
		return append(append([]string{}, pipeline.Stages[1:7]...), pipeline.StageWon)
	}
	return append([]string{}, pipeline.Stages[1:k+1]...)
}

// ErrDemoPresent is returned by seedDemo on a store that already holds the demo.
var ErrDemoPresent = errors.New("the demo data is already here (rollback_session demo takes it back)")

// seedDemo writes the demo data; step is called after every write.
func seedDemo(ctx context.Context, s *repo.Store, step func(what string)) (map[string]int, error) {
	ctx = audit.WithActor(ctx, demoActor())
	if p, err := directory.Of(s).ListOutlets(ctx, directory.OutletFilter{}, 1, 0); err != nil {
		return nil, err
	} else if p.Total > 0 {
		if q, err := directory.Of(s).ListOutlets(ctx, directory.OutletFilter{Search: demoOutlets[0].name}, 1, 0); err == nil && q.Total > 0 {
			return nil, ErrDemoPresent
		}
	}
	counts := map[string]int{}
	done := func(kind string) { counts[kind]++; step(kind) }
	str := func(v string) *string { return &v }

	type placed struct{ outlet, channel string }
	var outlets []placed
	for _, o := range demoOutlets {
		tier, audience := o.tier, o.audience
		out, err := directory.Of(s).CreateOutlet(ctx, directory.OutletFields{Name: str(o.name), Type: str(o.typ), Tier: &tier, Website: str("https://" + o.domain),
			Description: str(o.description), Country: str(o.country), Language: str("en"), Topics: o.topics, AudienceSize: &audience})
		if err != nil {
			return counts, fmt.Errorf("outlet %s: %w", o.name, err)
		}
		done("outlets")
		p := placed{outlet: out.ID}
		for _, c := range o.channels {
			ch, err := directory.Of(s).CreateChannel(ctx, out.ID, directory.ChannelFields{Type: str(c.typ), Name: str(c.name), URL: str("https://" + o.domain + c.path), Frequency: str(c.frequency)})
			if err != nil {
				return counts, fmt.Errorf("channel %s: %w", c.name, err)
			}
			done("channels")
			if p.channel == "" {
				p.channel = ch.ID
			}
		}
		outlets = append(outlets, p)
	}

	contacts := make([]string, len(demoFirst))
	emails := make([]string, len(demoFirst))
	for i, first := range demoFirst {
		o := demoOutlets[i%len(demoOutlets)]
		last := demoLast[i]
		emails[i] = strings.ToLower(first+"."+strings.ReplaceAll(last, "-", "")) + "@" + o.domain
		freelance := i%7 == 0
		f := directory.ContactFields{FirstName: str(first), LastName: str(last), Email: str(emails[i]), IsFreelance: &freelance,
			Title: str(demoRoles[i%len(demoRoles)]), Beats: []string{demoBeats[i%len(demoBeats)], demoBeats[(i*3+1)%len(demoBeats)]},
			Location: str([]string{"London", "New York", "Berlin", "Toronto", "Amsterdam", "Paris", "Dublin"}[i%7]),
			Bio:      str(fmt.Sprintf("Writes about %s for %s.", demoBeats[i%len(demoBeats)], o.name))}
		if f.Beats[0] == f.Beats[1] {
			f.Beats = f.Beats[:1]
		}
		if i == demoDoNotContact {
			yes := true
			f.DoNotContact, f.DoNotContactReason = &yes, str("Asked not to be pitched; send announcements to the desk editor instead.")
		}
		c, err := directory.Of(s).CreateContact(ctx, f, nil)
		if err != nil {
			return counts, fmt.Errorf("contact %s %s: %w", first, last, err)
		}
		contacts[i] = c.ID
		if _, _, err := directory.Of(s).AddContactOutlet(ctx, directory.AffiliationInput{ContactID: c.ID, OutletID: outlets[i%len(outlets)].outlet,
			Role: demoRoles[i%len(demoRoles)], IsPrimary: true, StartedOn: demoDay(-400 + 7*i)}); err != nil {
			return counts, fmt.Errorf("affiliation of %s %s: %w", first, last, err)
		}
		done("contacts")
		if freelance {
			if _, _, err := directory.Of(s).AddContactOutlet(ctx, directory.AffiliationInput{ContactID: c.ID, OutletID: outlets[(i+5)%len(outlets)].outlet, Role: "contributor"}); err != nil {
				return counts, fmt.Errorf("second affiliation of %s %s: %w", first, last, err)
			}
			done("affiliations")
		}
	}

	var opps []*pipeline.Opportunity
	for ci, dc := range demoCampaigns {
		target := int64(8 + 4*ci)
		camp, err := pipeline.Of(s).CreateCampaign(ctx, &pipeline.Campaign{Name: dc.name, Status: dc.status, Description: dc.description, Goals: dc.goals,
			StartsOn: demoDay(30 * ci), EndsOn: demoDay(30*ci + 120), TargetPlacements: &target})
		if err != nil {
			return counts, fmt.Errorf("campaign %s: %w", dc.name, err)
		}
		done("campaigns")
		for k, stage := range pipeline.Stages {
			i := (ci*len(pipeline.Stages) + k) % len(demoOutlets)
			// A journalist at that outlet (contact i works at outlet i mod 12),
			// another one per campaign, so no one is pitched twice within the
			// double-pitch window, and never the one not to be contacted.
			j := i + ci*len(demoOutlets)
			if j == demoDoNotContact {
				j += len(demoOutlets)
			}
			o := &pipeline.Opportunity{Title: fmt.Sprintf("%s: %s", demoOutlets[i].name, []string{"launch story", "founder interview"}[ci]),
				Description: fmt.Sprintf("Pitch %s to %s %s.", dc.name, demoFirst[j], demoLast[j]),
				CampaignID:  camp.ID, OutletID: outlets[i].outlet, ChannelID: outlets[i].channel, ContactIDs: []string{contacts[j]},
				Priority: pipeline.Priorities[k%len(pipeline.Priorities)], Type: pipeline.OpportunityTypes[k%len(pipeline.OpportunityTypes)],
				TargetDate: demoDay(60 + 30*ci + k)}
			if !pipeline.Terminal(stage) {
				o.NextAction, o.NextActionDate, o.NextActionOwner = "Follow up with "+demoFirst[j], demoDay(20+k), "press@example.org"
			}
			opp, err := pipeline.Of(s).CreateOpportunity(ctx, o)
			if err != nil {
				return counts, fmt.Errorf("opportunity %s: %w", o.Title, err)
			}
			done("opportunities")
			for _, st := range demoPath(k) {
				mv := pipeline.StageMove{Stage: st}
				if st == pipeline.StageLost {
					mv.LostReason = "The editor chose a competitor's exclusive."
				}
				if opp, err = pipeline.Of(s).ChangeStage(ctx, opp.ID, mv); err != nil {
					return counts, fmt.Errorf("opportunity %s to %s: %w", o.Title, st, err)
				}
				done("stage changes")
			}
			if opp.Stage != stage {
				return counts, fmt.Errorf("opportunity %s reached %s, not %s", o.Title, opp.Stage, stage)
			}
			opps = append(opps, opp)
		}
	}

	for n, dn := range demoNotes {
		for r := 0; r < 2; r++ {
			opp := opps[(2*n+r)%len(opps)]
			links := notes.LinkTargets{ContactIDs: opp.ContactIDs, OpportunityIDs: []string{opp.ID}}
			if r == 1 {
				links = notes.LinkTargets{ContactIDs: opp.ContactIDs, OutletIDs: []string{opp.OutletID}}
			}
			if _, err := notes.Of(s).CreateNote(ctx, notes.NewNote{Type: dn.typ, Title: dn.title, Content: dn.content, OccurredAt: demoDay(10 + 3*n + r), Links: links}); err != nil {
				return counts, fmt.Errorf("note %s: %w", dn.title, err)
			}
			done("notes")
		}
	}

	// Coverage: every opportunity that was placed, published or won, and two
	// organic pieces.
	var covered []string
	for _, opp := range opps {
		switch opp.Stage {
		case "placed", "published", pipeline.StageWon:
		default:
			continue
		}
		covered = append(covered, opp.ID)
	}
	for k := 0; k < 10; k++ {
		c := &pipeline.Coverage{Title: fmt.Sprintf("%s piece %d", []string{"Aurora 3.0", "Series B"}[k%2], k+1),
			PublishedAt: *demoDay(40 + 2*k), Type: pipeline.CoverageTypes[k%len(pipeline.CoverageTypes)],
			Sentiment: pipeline.Sentiments[k%len(pipeline.Sentiments)], Depth: pipeline.Depths[k%len(pipeline.Depths)],
			ShareOfVoice: pipeline.SharesOfVoice[k%len(pipeline.SharesOfVoice)], Summary: "How the team schedules work when the grid is greenest."}
		reach := int64(5000 * (k + 1) * (k + 1))
		c.Reach = &reach
		var outlet, channel, opportunity *string
		if k < len(covered) {
			id := covered[k]
			opportunity = &id
			c.InitiatedBy = "pitched"
		} else {
			o := outlets[(3*k)%len(outlets)]
			outlet, channel = &o.outlet, &o.channel
			c.InitiatedBy = "organic"
			c.ContactIDs = []string{contacts[(3*k)%len(contacts)]}
		}
		c.URL = fmt.Sprintf("https://coverage.example.com/%d", k+1)
		cov, err := pipeline.Of(s).CreateCoverage(ctx, c, outlet, channel, opportunity)
		if err != nil {
			return counts, fmt.Errorf("coverage %s: %w", c.Title, err)
		}
		done("coverage")
		if k < 3 {
			in := pipeline.InlineInput{CoverageID: cov.ID, Type: "document", Filename: fmt.Sprintf("clipping-%d.txt", k+1), MimeType: "text/plain",
				Data: []byte(c.Title + "\n\n" + c.Summary + "\n")}
			if k == 2 {
				in.Type, in.Filename, in.MimeType, in.Data = "image", "screenshot.png", "image/png", demoPNG
			}
			if _, err := pipeline.Of(s).CreateInlineMedia(ctx, in); err != nil {
				return counts, fmt.Errorf("media of %s: %w", c.Title, err)
			}
			done("media")
		}
	}

	// Email threads: a pitch and its reply, a reply chain, and a thread
	// linked to its opportunity.
	team := "press@example.org"
	for t := 0; t < 3; t++ {
		opp := opps[2+t] // pitched, responded, in_progress in the first campaign
		j := -1
		for i, id := range contacts {
			if len(opp.ContactIDs) > 0 && opp.ContactIDs[0] == id {
				j = i
			}
		}
		subject := fmt.Sprintf("Aurora 3.0: an exclusive for %s?", demoFirst[j])
		first := fmt.Sprintf("<demo-%d-1@example.org>", t)
		var threadID string
		for m := 0; m < 2; m++ {
			in := inbox.IncomingEmail{MessageID: first, From: team, To: []string{emails[j]}, Subject: subject, Date: *demoDay(12 + t),
				BodyText: fmt.Sprintf("Hi %s,\n\nWould you like an early look at Aurora 3.0 before the launch?\n\nThe press team", demoFirst[j]), Source: "demo"}
			if m == 1 {
				in = inbox.IncomingEmail{MessageID: fmt.Sprintf("<demo-%d-2@example.org>", t), InReplyTo: first, References: []string{first},
					From: emails[j], To: []string{team}, Subject: "Re: " + subject, Date: *demoDay(13 + t), Source: "demo",
					BodyText: "Thanks, yes please. Can you send the benchmark numbers under embargo?"}
			}
			res, err := inbox.Of(s).IngestEmail(ctx, in)
			if err != nil {
				return counts, fmt.Errorf("email %s: %w", in.MessageID, err)
			}
			if res.Outcome == inbox.EmailSkipped {
				return counts, fmt.Errorf("email %s was skipped: no known contact", in.MessageID)
			}
			threadID = res.ThreadID
			done("email messages")
		}
		if _, _, err := inbox.Of(s).LinkEmailOpportunity(ctx, threadID, opp.ID); err != nil {
			return counts, fmt.Errorf("link thread %s: %w", threadID, err)
		}
		done("email threads")
	}
	return counts, nil
}

// demoPNG is a 1×1 PNG image.
var demoPNG = []byte{0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00,
	0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99,
	0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82}

// demoKinds orders the seed summary.
var demoKinds = []string{"outlets", "channels", "contacts", "affiliations", "campaigns", "opportunities", "stage changes",
	"notes", "coverage", "media", "email messages", "email threads"}

func writeSeedSummary(w io.Writer, counts map[string]int) {
	fmt.Fprintf(w, "demo data written under session %q (rollback_session %s takes it back):\n", DemoSession, DemoSession)
	for _, k := range demoKinds {
		fmt.Fprintf(w, "  %-15s %4d", k, counts[k])
		if k == "campaigns" {
			// list_campaigns shows one more: say which, and why it is there.
			fmt.Fprintf(w, "  (and %s, which every store has from its first start: opportunities created without a campaign join it)", pipeline.GeneralCampaign)
		}
		fmt.Fprintln(w)
	}
}

// serveDemo writes the demo data when the store has no outlet yet.
func serveDemo(ctx context.Context, s *repo.Store, progressTo io.Writer, log zerolog.Logger) error {
	p, err := directory.Of(s).ListOutlets(ctx, directory.OutletFilter{IncludeArchived: true}, 1, 0)
	if err != nil {
		return err
	}
	if p.Total > 0 {
		log.Info().Msg("--demo: the store is not empty; no demo data written")
		return nil
	}
	prog := newProgress(progressTo, "seed --demo", demoPlan())
	counts, err := seedDemo(ctx, s, prog.step)
	prog.finish()
	if err != nil {
		return fmt.Errorf("demo data: %w", err)
	}
	writeSeedSummary(progressTo, counts)
	return nil
}
