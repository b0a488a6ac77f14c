package pipeline

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"outreach/repo"
)

// The media's configuration and the secret signed media URLs are made
// with, held per store from start (the media records, their uploads and
// the signing of URLs are media.go's; reports and pitches sign their links
// with the same secret). The secret is never in the store, where every
// reader of the database (the analyst endpoint, a backup) would see it and
// could forge URLs: it is MediaOptions.SigningKey (the embedded store keeps
// it in a 0600 file in its data directory; with MongoDB the operator gives
// it to every instance), or a random one made when the store opens. (The
// core removes the copy older versions kept in the settings collection:
// repo/mediakey.go.)

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

// MinSigningKey is the shortest URL-signing secret accepted, in bytes.
const MinSigningKey = 32

// media is what the area keeps per store (the store's AreaState): the
// options in effect, the URL-signing secret and the lock uploads complete
// under.
type media struct {
	opts     atomic.Pointer[MediaOptions]
	key      atomic.Pointer[[]byte]
	uploadMu sync.Mutex
}

type mediaKey struct{}

func (s *Store) media() *media {
	return s.AreaState(mediaKey{}, func() any { return new(media) }).(*media)
}

// WithMedia is the store's option (repo.Options.Setup) that gives it the
// media's configuration and URL-signing secret as it opens; a secret
// shorter than MinSigningKey fails the open. A store opened without it
// takes the defaults and a random secret.
func WithMedia(o MediaOptions) func(*repo.Store) error {
	return func(s *repo.Store) error {
		m := Of(s).media()
		if err := m.setSigningKey(o.SigningKey); err != nil {
			return err
		}
		o = o.withDefaults()
		m.opts.Store(&o)
		return nil
	}
}

// MediaOptions returns the media configuration in effect.
func (s *Store) MediaOptions() MediaOptions {
	if o := s.media().opts.Load(); o != nil {
		return *o
	}
	return MediaOptions{}.withDefaults()
}

// SigningKey returns the URL-signing secret.
func (s *Store) SigningKey(context.Context) ([]byte, error) {
	m := s.media()
	if k := m.key.Load(); k != nil {
		return *k, nil
	}
	// A store opened without WithMedia: a random secret, made once.
	key := make([]byte, MinSigningKey)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("media URL secret: %w", err)
	}
	m.key.CompareAndSwap(nil, &key)
	return *m.key.Load(), nil
}

// setSigningKey sets the URL-signing secret: key, or a random one.
func (m *media) setSigningKey(key []byte) error {
	if len(key) == 0 {
		key = make([]byte, MinSigningKey)
		if _, err := rand.Read(key); err != nil {
			return fmt.Errorf("media URL secret: %w", err)
		}
	} else if len(key) < MinSigningKey {
		return fmt.Errorf("media URL secret: it is %d bytes; give at least %d", len(key), MinSigningKey)
	}
	key = bytes.Clone(key)
	m.key.Store(&key)
	return nil
}

// UploadTurns is the lock under which a media upload completes: one at a
// time per store (media.go).
func (s *Store) UploadTurns() *sync.Mutex { return &s.media().uploadMu }
