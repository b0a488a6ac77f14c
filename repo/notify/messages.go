package notify

import (
	"context"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/repo"
)

// Kinds of Slack messages the service sends.
const (
	MessageKindMessage  = "message"
	MessageKindQuestion = "question"
	// MessageKindPitchApproval is a pitch posted for approval; a team
	// member answers in its thread (request_pitch_approval).
	MessageKindPitchApproval = "pitch_approval"
)

// Question statuses.
const (
	QuestionOpen     = "open"
	QuestionAnswered = "answered"
)

// Message is a message the service sent to the team's Slack: a plain
// message or a question whose answers are read from its thread. It is
// recorded by a change with action send, which cannot be rolled back.
type Message struct {
	repo.Meta  `bson:",inline"`
	Kind       string     `bson:"kind" json:"kind"`
	Channel    string     `bson:"channel" json:"channel"`
	Text       string     `bson:"text" json:"text"`
	TS         string     `bson:"ts,omitempty" json:"ts,omitempty"`
	Via        string     `bson:"via" json:"via"`
	Question   string     `bson:"question,omitempty" json:"question,omitempty"`
	Context    string     `bson:"context,omitempty" json:"context,omitempty"`
	Options    []string   `bson:"options,omitempty" json:"options,omitempty"`
	Status     string     `bson:"status,omitempty" json:"status,omitempty"`
	Answers    []Answer   `bson:"answers,omitempty" json:"answers,omitempty"`
	AnsweredAt *time.Time `bson:"answered_at,omitempty" json:"answered_at,omitempty"`
	// PitchID and ContentHash are the pitch posted for approval and the
	// exact content posted: an answer approves that content only.
	PitchID     string `bson:"pitch_id,omitempty" json:"pitch_id,omitempty"`
	ContentHash string `bson:"content_hash,omitempty" json:"content_hash,omitempty"`
}

// Answer is one reply in a question's thread.
type Answer struct {
	User string    `bson:"user" json:"user"`
	Text string    `bson:"text" json:"text"`
	TS   string    `bson:"ts" json:"ts"`
	At   time.Time `bson:"at" json:"at"`
}

// RecordSend records a message that was sent, as a send change.
func (s *Store) RecordSend(ctx context.Context, m *Message) error {
	if (m.Kind == MessageKindQuestion || m.Kind == MessageKindPitchApproval) && m.Status == "" {
		m.Status = QuestionOpen
	}
	mut, err := repo.Creation(repo.CollMessages, m)
	if err != nil {
		return err
	}
	mut.Action, mut.Irreversible = audit.ActionSend, true
	entries, err := s.Write(ctx, mut)
	if err != nil {
		return err
	}
	m.Version, m.LastChange = 1, entries[0].ID
	return nil
}

// Question returns one question.
func (s *Store) Question(ctx context.Context, id string) (*Message, error) {
	m, err := repo.Find[*Message](ctx, s.Store, repo.CollMessages, id)
	if err != nil {
		return nil, err
	}
	if m.Kind != MessageKindQuestion {
		return nil, repo.NotFound("question", id)
	}
	return m, nil
}

// RecordAnswers stores the replies read from a question's thread; a
// question with a reply is answered. Replies already stored write nothing.
func (s *Store) RecordAnswers(ctx context.Context, id string, answers []Answer) (*Message, error) {
	return repo.Modify(ctx, s.Store, repo.CollMessages, id, audit.ActionUpdate, func(m *Message) error {
		if slices.EqualFunc(m.Answers, answers, func(a, b Answer) bool { return a.TS == b.TS && a.Text == b.Text && a.User == b.User }) {
			return nil
		}
		m.Answers = answers
		if len(answers) > 0 && m.Status != QuestionAnswered {
			m.Status = QuestionAnswered
			t := repo.Now()
			m.AnsweredAt = &t
		}
		return nil
	})
}

// Questions lists questions, newest first; status filters when not empty.
func (s *Store) Questions(ctx context.Context, status string, limit, offset int) (repo.Page[Message], error) {
	f := bson.M{"kind": MessageKindQuestion}
	if status != "" {
		f["status"] = status
	}
	return repo.ListPage[Message](ctx, s.Store, repo.CollMessages, f, bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}, limit, offset)
}
