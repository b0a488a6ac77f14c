package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"

	"outreach/embedded"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/server"
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
		k, err := access.Of(s).AnalystKey(ctx, user)
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

// analystTLS is the analyst endpoint's TLS configuration: its own
// certificate files, else the service's (files or ACME) when it serves
// HTTPS. Without either, an endpoint on an address beyond loopback is
// refused unless the operator allows plain text.
func analystTLS(cfg config, service *tls.Config, log zerolog.Logger) (*tls.Config, error) {
	if cfg.uri != "" || cfg.mongoListen == "" {
		return nil, nil // no endpoint (MONGODB_URI: the flag is ignored)
	}
	if cfg.mongoTLSCert != "" || cfg.mongoTLSKey != "" {
		return server.CertConfig(cfg.mongoTLSCert, cfg.mongoTLSKey, "--mongo-tls-cert", "--mongo-tls-key", log)
	}
	if service != nil {
		return service, nil
	}
	if loopbackAddr(cfg.mongoListen) {
		return nil, nil
	}
	if !cfg.mongoAllowPlaintext {
		return nil, fmt.Errorf("--mongo-listen %s is not a loopback address and the analyst endpoint has no TLS: every document an analyst reads would cross the network in the clear. "+
			"Give it a certificate (--mongo-tls-cert and --mongo-tls-key, or serve HTTPS with --tls-cert or --acme-host, whose certificate it then uses), "+
			"listen on 127.0.0.1, or, behind a TLS proxy of your own, say --mongo-allow-plaintext", cfg.mongoListen)
	}
	log.Warn().Str("mongo_listen", cfg.mongoListen).Msg("the analyst endpoint listens beyond loopback without TLS (--mongo-allow-plaintext): the data it serves crosses the network in the clear")
	return nil, nil
}

// loopbackAddr reports whether a listen address is on loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
