// Package embedded runs the default store inside the process: FerretDB with
// its SQLite backend, speaking the MongoDB wire protocol, so the rest of the
// service talks to it through the official driver exactly as it talks to
// MongoDB.
package embedded

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Store is a running embedded store.
type Store struct {
	// URI is the MongoDB connection string of the store (for the service
	// itself: it accepts writes).
	URI string
	// PublicURI is the connection string of the endpoint opened on
	// Options.TCP for people (mongosh), empty without one.
	PublicURI string
	gate      net.Listener
	dir       string // the SQLite files' folder; empty in memory
	stop      context.CancelFunc
	done      chan struct{}
}

// Options configure Start.
type Options struct {
	// Dir holds the SQLite files; empty means in memory (tests).
	Dir string
	// TCP, when set, also exposes the wire endpoint on this address for
	// mongosh. It is read-only (see readonly.go) unless AllowWrites.
	TCP string
	// AllowWrites lets writes through the TCP endpoint; they bypass the
	// change log.
	AllowWrites bool
}

// Start starts FerretDB on opts.Dir and returns once it accepts connections.
func Start(ctx context.Context, opts Options) (*Store, error) {
	sqliteURL := "file:/?mode=memory"
	dataDir := ""
	var unlock *os.File
	listener := ferretdb.ListenerConfig{}
	if opts.AllowWrites {
		listener.TCP = opts.TCP
	}
	var gateLn net.Listener
	if opts.TCP != "" && !opts.AllowWrites {
		var err error
		if gateLn, err = net.Listen("tcp", opts.TCP); err != nil {
			return nil, fmt.Errorf("mongo wire endpoint: %w", err)
		}
	}
	fail := func() {
		if gateLn != nil {
			gateLn.Close()
		}
	}
	if opts.Dir != "" {
		abs, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		if err := os.MkdirAll(abs, 0o700); err != nil {
			fail()
			return nil, fmt.Errorf("data directory: %w", err)
		}
		sqliteURL = (&url.URL{Scheme: "file", Path: abs + "/"}).String()
		dataDir = abs
		lock, err := os.OpenFile(filepath.Join(abs, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			fail()
			return nil, fmt.Errorf("data directory: %w", err)
		}
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			fail()
			lock.Close()
			return nil, fmt.Errorf("data directory %s is in use by another outreach process; stop it or point --data elsewhere", abs)
		}
		unlock = lock
	}
	if listener.TCP == "" && listener.Unix == "" {
		listener.TCP = "127.0.0.1:0"
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  listener,
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fail()
		if unlock != nil {
			unlock.Close()
		}
		return nil, fmt.Errorf("start embedded store: %w", err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &Store{URI: f.MongoDBURI(), stop: stop, done: make(chan struct{}), dir: dataDir}
	if opts.TCP != "" {
		s.PublicURI = s.URI
	}
	if gateLn != nil {
		s.gate = gateLn
		s.PublicURI = "mongodb://" + gateLn.Addr().String() + "/"
		go gate(gateLn, strings.TrimSuffix(strings.TrimPrefix(s.URI, "mongodb://"), "/"))
	}
	go func() {
		defer close(s.done)
		if unlock != nil {
			defer unlock.Close()
		}
		_ = f.Run(runCtx)
	}()
	return s, nil
}

// Close stops the store and waits until its files are closed.
func (s *Store) Close() {
	if s.gate != nil {
		s.gate.Close()
	}
	s.stop()
	<-s.done
}
