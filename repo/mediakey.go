package repo

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
)

// The media's configuration and the secret signed media URLs are made
// with, held by the store from start (the media records, their uploads and
// the signing of URLs are the pipeline's, repo/pipeline/media.go). The secret is
// never in the store, where every reader of the database (the analyst
// endpoint, a backup) would see it and could forge URLs: it is
// MediaOptions.SigningKey (the embedded store keeps it in a 0600 file in its
// data directory; with MongoDB the operator gives it to every instance), or
// a random one made when the store opens.

// Media defaults.
const (
	// DefaultMediaMaxBytes caps a file uploaded through a signed URL.
	DefaultMediaMaxBytes = 100 << 20
	// DefaultMediaURLTTL is how long a signed upload or download URL works.
	DefaultMediaURLTTL = 15 * time.Minute
	// InlineMediaMaxBytes caps a file sent inline (decoded) to upload_media.
	InlineMediaMaxBytes = 512 << 10
)

// MediaOptions configure media uploads and signed URLs.
type MediaOptions struct {
	// MaxBytes caps an upload through a signed URL; zero means DefaultMediaMaxBytes.
	MaxBytes int64
	// URLTTL is the lifetime of a signed URL; zero means DefaultMediaURLTTL.
	URLTTL time.Duration
	// PublicURL is the service's base URL as clients reach it (scheme and
	// host, e.g. https://outreach.example.com), used in signed URLs. Empty:
	// derived from each request.
	PublicURL string
	// SigningKey is the secret signed media URLs are made with, at least
	// MinSigningKey bytes; every instance on one database needs the same
	// one to accept the others' URLs. Empty: a random one made when the
	// store opens, good for this process only.
	SigningKey []byte
}

func (o MediaOptions) withDefaults() MediaOptions {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMediaMaxBytes
	}
	if o.URLTTL <= 0 {
		o.URLTTL = DefaultMediaURLTTL
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	return o
}

// MediaOptions returns the media configuration in effect.
func (s *Store) MediaOptions() MediaOptions { return s.media }

// MinSigningKey is the shortest URL-signing secret accepted, in bytes.
const MinSigningKey = 32

// signingID is the id of the settings record that held the URL-signing
// secret before it left the store (dropStoredSigningSecret).
const signingID = "6d1f4a8e-3c2b-4f7a-9e05-8b1c2d3e4f50"

type setting struct {
	Meta   `bson:",inline"`
	Name   string `bson:"name"`
	Secret string `bson:"secret,omitempty"`
}

// SigningKey returns the URL-signing secret.
func (s *Store) SigningKey(context.Context) ([]byte, error) {
	if k := s.mediaKey.Load(); k != nil {
		return *k, nil
	}
	return nil, errors.New("media URL secret: none configured")
}

// setSigningKey sets the URL-signing secret: key, or a random one.
func (s *Store) setSigningKey(key []byte) error {
	if len(key) == 0 {
		key = make([]byte, MinSigningKey)
		if _, err := rand.Read(key); err != nil {
			return fmt.Errorf("media URL secret: %w", err)
		}
	} else if len(key) < MinSigningKey {
		return fmt.Errorf("media URL secret: it is %d bytes; give at least %d", len(key), MinSigningKey)
	}
	key = bytes.Clone(key)
	s.mediaKey.Store(&key)
	return nil
}

// dropStoredSigningSecret takes the URL-signing secret out of the settings
// record that older versions kept it in: an update through the write path
// that removes it (its change entry shows it as [redacted]) and archives the
// record, which nothing reads any more. The old secret is not adopted: it
// was readable by whoever could read the store, so URLs signed with it stop
// working (they live minutes), and a store that never had one is untouched.
func (s *Store) dropStoredSigningSecret(ctx context.Context) error {
	var st setting
	err := s.coll(CollSettings).FindOne(ctx, bson.M{"_id": signingID, "secret": bson.M{"$exists": true}}).Decode(&st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("media URL secret: %w", err)
	}
	ctx = audit.WithActor(ctx, SystemActor("media-url-signing"))
	_, err = Modify(ctx, s, CollSettings, signingID, audit.ActionArchive, func(st *setting) error {
		st.Secret = ""
		if st.ArchivedAt == nil {
			t := Now()
			st.ArchivedAt = &t
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("media URL secret: remove the copy older versions stored in settings: %w", err)
	}
	s.Log.Info().Msg("media URL signing: the secret older versions kept in the settings collection was removed; URLs signed before now are refused")
	return nil
}

// UploadTurns is the lock under which a media upload completes: one at a
// time per store (package pipeline).
func (s *Store) UploadTurns() *sync.Mutex { return &s.uploadMu }
