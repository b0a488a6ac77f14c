package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/rs/zerolog"

	"outreach/embedded"
	"outreach/repo"
)

// analystAuth lets the analyst endpoint (serve --mongo-listen) check its
// users against the agent keys: the user name is a key's id, and the key
// may read there while it is active, has the read scope and a verifier
// (repo.Store.AnalystKey).
func analystAuth(store *atomic.Pointer[repo.Store]) embedded.Authenticator {
	return func(ctx context.Context, user string) (embedded.Credential, error) {
		s := store.Load()
		if s == nil {
			return embedded.Credential{}, errors.New("the store is still opening")
		}
		k, err := s.AnalystKey(ctx, user)
		if err != nil {
			return embedded.Credential{}, err
		}
		v := k.SCRAM
		return embedded.Credential{Salt: v.Salt, Iterations: v.Iterations, StoredKey: v.StoredKey, ServerKey: v.ServerKey}, nil
	}
}

// zerologHandler writes the embedded package's log records to the
// service's logger.
type zerologHandler struct{ log zerolog.Logger }

func (h zerologHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h zerologHandler) Handle(_ context.Context, r slog.Record) error {
	ev := h.log.Info()
	if r.Level >= slog.LevelWarn {
		ev = h.log.Warn()
	}
	r.Attrs(func(a slog.Attr) bool {
		ev = ev.Str(a.Key, a.Value.String())
		return true
	})
	ev.Msg(r.Message)
	return nil
}

func (h zerologHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h zerologHandler) WithGroup(string) slog.Handler      { return h }
