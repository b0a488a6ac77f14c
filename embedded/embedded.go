// Package embedded runs the default store inside the process: FerretDB with
// its SQLite backend, speaking the MongoDB wire protocol, so the rest of the
// service talks to it through the official driver exactly as it talks to
// MongoDB.
//
// The store has no users or roles of its own, so it never listens on a
// network port: FerretDB listens on a Unix socket in a directory only this
// process's user can enter (mode 0700), and the service's driver connects
// over it. The only way in from the network is the analyst endpoint
// (analyst.go), which authenticates every connection and lets reads alone
// through.
package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Store is a running embedded store.
type Store struct {
	// URI is the MongoDB connection string of the store, for the service
	// itself: a Unix socket in a private directory; it accepts writes.
	URI string
	// PublicURI is the connection string of the analyst endpoint opened on
	// Options.TCP (without credentials), empty without one.
	PublicURI string
	// Repaired says, a line each, what the start repaired in the store's
	// catalog after a process was killed while changing it (catalog.go);
	// empty almost always.
	Repaired []string
	gate     *gate
	dir      string // the SQLite files' folder; empty in memory
	sockDir  string // removed on Close when it is a private temporary one
	stop     context.CancelFunc
	done     chan struct{}
}

// Options configure Start.
type Options struct {
	// Dir holds the SQLite files; empty means in memory (tests).
	Dir string
	// TCP, when set, also opens the analyst endpoint on this address: the
	// MongoDB wire protocol for mongosh and drivers, authenticated by Auth,
	// read-only and bounded (analyst.go).
	TCP string
	// Auth checks the analyst endpoint's users; required with TCP.
	Auth Authenticator
	// Hidden names the collections the analyst endpoint never shows
	// (those that hold secrets or their verifiers).
	Hidden []string
	// HiddenFields names, per collection, fields the analyst endpoint
	// never shows: left out of every answer, and a command that names one
	// is refused.
	HiddenFields map[string][]string
	// TLS, when set, makes the analyst endpoint speak TLS only (as mongod
	// with --tlsMode requireTLS): mongosh --tls, drivers with tls=true.
	TLS *tls.Config
	// Logger receives the analyst endpoint's refusals of authentication
	// (never a password); nil discards them.
	Logger *slog.Logger
}

// sockName is the store's socket in its private directory. The driver takes
// a Unix socket for a host only when its path ends in .sock.
const sockName = "store.sock"

// maxSockPath is the longest socket path Linux accepts (sun_path is 108
// bytes with its terminating NUL).
const maxSockPath = 107

// socketDir returns a directory for the store's socket that only this user
// can enter: run/ in the data directory, or a fresh temporary one (in
// memory, or when the data directory's path is too long for a socket).
func socketDir(dataDir string) (dir string, temporary bool, err error) {
	if dataDir != "" {
		dir = filepath.Join(dataDir, "run")
		if len(filepath.Join(dir, sockName)) <= maxSockPath {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return "", false, err
			}
			// MkdirAll keeps the mode of a directory that exists.
			if err := os.Chmod(dir, 0o700); err != nil {
				return "", false, err
			}
			fi, err := os.Lstat(dir)
			if err != nil {
				return "", false, err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
				return "", false, fmt.Errorf("%s is not a directory owned by this user", dir)
			}
			return dir, false, nil
		}
	}
	dir, err = os.MkdirTemp("", "outreach-store-") // mode 0700
	if err != nil {
		return "", false, err
	}
	if len(filepath.Join(dir, sockName)) > maxSockPath {
		os.Remove(dir)
		return "", false, errors.New("no directory with a path short enough for the store's socket: set TMPDIR to a short path")
	}
	return dir, true, nil
}

// pageCache bounds each SQLite connection's page cache (cache_size in KiB
// when negative). The store's pool keeps every connection it has opened
// (up to 100) with its cache, outside Go's heap; SQLite's default, 2,000
// KiB each, held tens of megabytes once a few dozen reads had run at once.
// The file's pages stay in the kernel's cache either way.
const pageCache = "_pragma=cache_size(-512)"

// storeLog is FerretDB's logger, of which nothing is kept: a handler that
// discards, not a text handler writing nowhere. FerretDB adds each SQL
// statement with its arguments (the documents) to its logger before and
// after it runs it, which a text handler formats at once: 6 % of a write's
// time in the profile of the writes' bench.
var storeLog = slog.New(slog.DiscardHandler)

// Start starts FerretDB on opts.Dir and returns once it accepts connections.
func Start(ctx context.Context, opts Options) (s *Store, err error) {
	if opts.TCP != "" && opts.Auth == nil {
		return nil, errors.New("analyst endpoint: no authenticator")
	}
	sqliteURL := "file:/?mode=memory"
	dataDir := ""
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()
	var gateLn net.Listener
	if opts.TCP != "" {
		if gateLn, err = net.Listen("tcp", opts.TCP); err != nil {
			return nil, fmt.Errorf("analyst endpoint: %w", err)
		}
		cleanup = append(cleanup, func() { gateLn.Close() })
	}
	tcpAddr := ""
	if gateLn != nil {
		tcpAddr = gateLn.Addr().String()
		if opts.TLS != nil {
			c := opts.TLS.Clone()
			c.NextProtos = nil // the wire protocol has no ALPN name
			if c.MinVersion == 0 {
				c.MinVersion = tls.VersionTLS12
			}
			gateLn = tls.NewListener(gateLn, c)
		}
	}
	var unlock *os.File
	var repaired []string
	if opts.Dir != "" {
		abs, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		sqliteURL = (&url.URL{Scheme: "file", Path: abs + "/", RawQuery: pageCache}).String()
		dataDir = abs
		lock, err := os.OpenFile(filepath.Join(abs, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lock.Close()
			return nil, fmt.Errorf("data directory %s is in use by another outreach process; stop it or point --data elsewhere", abs)
		}
		unlock = lock
		cleanup = append(cleanup, func() { lock.Close() })
		if repaired, err = repairCatalog(ctx, abs); err != nil {
			return nil, fmt.Errorf("embedded store: %w", err)
		}
	}
	sockDir, temporary, err := socketDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("store socket: %w", err)
	}
	if temporary {
		cleanup = append(cleanup, func() { os.RemoveAll(sockDir) })
	}
	sock := filepath.Join(sockDir, sockName)
	// A socket left by a process that was killed: the data directory's lock
	// says no other process serves it.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("store socket: %w", err)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{Unix: sock},
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
		Logger:    storeLog,
	})
	if err != nil {
		return nil, fmt.Errorf("start embedded store: %w", err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s = &Store{URI: "mongodb://" + url.PathEscape(sock) + "/", stop: stop, done: make(chan struct{}), dir: dataDir, Repaired: repaired}
	if temporary {
		s.sockDir = sockDir
	}
	go func() {
		defer close(s.done)
		if unlock != nil {
			defer unlock.Close()
		}
		_ = f.Run(runCtx)
	}()
	if gateLn != nil {
		log := opts.Logger
		if log == nil {
			log = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
		s.gate = newGate(gateLn, sock, opts.Auth, opts.Hidden, opts.HiddenFields, log)
		s.PublicURI = "mongodb://" + tcpAddr + "/"
		if opts.TLS != nil {
			s.PublicURI += "?tls=true"
		}
		go s.gate.serve()
	}
	return s, nil
}

// Close stops the store and waits until its files are closed.
func (s *Store) Close() {
	if s.gate != nil {
		s.gate.close()
	}
	s.stop()
	<-s.done
	if s.sockDir != "" {
		os.RemoveAll(s.sockDir)
	}
}
