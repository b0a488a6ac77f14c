package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/access"
)

// The commands that write or check the store (keys, verify, indexes) run
// inside the server when one serves the embedded store's data directory: a
// second process must never write that store or run its recovery, since the
// write path serialises writes within the one process that owns it. The
// server answers them on a Unix socket in the data directory (mode 0600:
// whoever can read the data files may run them). With the server stopped,
// the command opens the store itself, holding the data directory's lock.

// adminSocket is the server's command socket, in the data directory.
const adminSocket = "admin.sock"

// command is one store command, as the command line gives it.
type command struct {
	Name      string   `json:"name"` // keys create, keys list, keys revoke, verify, indexes
	KeyName   string   `json:"key_name,omitempty"`
	UserEmail string   `json:"user_email,omitempty"`
	AgentType string   `json:"agent_type,omitempty"`
	Scopes    []string `json:"scopes,omitempty"`
	ID        string   `json:"id,omitempty"`
	JSON      bool     `json:"json,omitempty"`       // verify --json
	PublicURL string   `json:"public_url,omitempty"` // users invite: the link's base
	To        string   `json:"to,omitempty"`         // backup: the target directory
	// backup --with-secrets: the data directory whose key files go in,
	// encrypted with the passphrase (sent over the 0600 socket, never logged).
	SecretsDir string `json:"secrets_dir,omitempty"`
	Passphrase string `json:"passphrase,omitempty"`
	// mailbox: the data directory whose mailbox key a command run without
	// a server reads.
	DataDir string `json:"data_dir,omitempty"`
}

type commandResult struct {
	Output string `json:"output"`
	Error  string `json:"error,omitempty"`
}

// runCommand runs c in the server serving cfg's data directory, or on the
// store opened here when none does.
func runCommand(ctx context.Context, cfg config, c command, stdout, progressTo io.Writer, log zerolog.Logger) error {
	if cfg.uri == "" {
		if res, ok, err := callServer(ctx, cfg.data, c); ok {
			if err != nil {
				return err
			}
			fmt.Fprint(stdout, res.Output)
			if res.Error != "" {
				return errors.New(res.Error)
			}
			return nil
		}
	}
	store, closeStore, err := open(ctx, cfg, false, progressTo, log)
	if err != nil {
		return err
	}
	defer closeStore()
	out, err := execute(ctx, store, c, progressTo)
	fmt.Fprint(stdout, out)
	return err
}

// callServer sends c to the server on dir; ok is false when none answers.
func callServer(ctx context.Context, dir string, c command) (commandResult, bool, error) {
	var res commandResult
	sock, err := filepath.Abs(filepath.Join(dir, adminSocket))
	if err != nil {
		return res, false, nil
	}
	conn, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return res, false, nil
	}
	conn.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	body, _ := json.Marshal(c)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://outreach/command", bytes.NewReader(body))
	if err != nil {
		return res, true, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return res, true, fmt.Errorf("the server on %s did not answer: %w", dir, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return res, true, fmt.Errorf("the server on %s answered %s: %w", dir, resp.Status, err)
	}
	return res, true, nil
}

// serveCommands answers store commands on dir's command socket until ctx
// ends; the returned func closes it.
func serveCommands(ctx context.Context, store *repo.Store, dir string, log zerolog.Logger) (func(), error) {
	sock, err := filepath.Abs(filepath.Join(dir, adminSocket))
	if err != nil {
		return nil, err
	}
	_ = os.Remove(sock) // a stale socket of a process that died: the data lock guards a live one
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("command socket: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("command socket: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c command
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&c) != nil {
			http.Error(w, "POST a command", http.StatusBadRequest)
			return
		}
		out, err := execute(r.Context(), store, c, io.Discard) // the caller gets the output at the end
		res := commandResult{Output: out}
		if err != nil {
			res.Error = err.Error()
		}
		log.Info().Str("command", c.Name).Bool("ok", err == nil).Msg("command from the command line")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	})}
	go srv.Serve(ln)
	return func() { srv.Close(); os.Remove(sock) }, nil
}

// execute runs c on store and returns what the command prints; progress is
// reported on prog.
func execute(ctx context.Context, store *repo.Store, c command, prog io.Writer) (string, error) {
	var out strings.Builder
	ctx = audit.WithActor(ctx, repo.SystemActor(c.Name))
	switch c.Name {
	case "indexes":
		p := newProgress(prog, "indexes: creating the index list", -1)
		err := store.ApplyIndexes(ctx)
		p.finish()
		fmt.Fprintf(&out, "indexes applied (write mode %s)\n", store.Capabilities().WriteMode)
		return out.String(), err
	case "verify":
		r, err := runVerify(ctx, store, prog)
		if err != nil {
			return "", err
		}
		r.write(&out, c.JSON)
		if !r.OK {
			return out.String(), fmt.Errorf("%d invariant violations", len(r.Violations))
		}
		return out.String(), nil
	case "seed --demo":
		p := newProgress(prog, "seed --demo", demoPlan())
		counts, err := seedDemo(audit.WithActor(ctx, demoActor()), store, p.step)
		p.finish()
		if err != nil {
			return "", err
		}
		writeSeedSummary(&out, counts)
		return out.String(), nil
	case "keys create":
		user, err := keyOwner(ctx, store, c.UserEmail)
		if err != nil {
			return "", err
		}
		_, key, err := access.Of(store).CreateKey(ctx, access.NewKeyInput{UserID: user.ID, Name: c.KeyName, AgentType: c.AgentType, Scopes: c.Scopes})
		if err != nil {
			return "", err
		}
		fmt.Fprintln(&out, key)
		return out.String(), nil
	case "keys list":
		userID := ""
		if c.UserEmail != "" {
			u, err := access.Of(store).UserByEmail(ctx, c.UserEmail)
			if err != nil {
				return "", err
			}
			userID = u.ID
		}
		ks, err := access.Of(store).ListKeys(ctx, userID)
		if err != nil {
			return "", err
		}
		enc := json.NewEncoder(&out)
		for _, k := range ks {
			enc.Encode(k)
		}
		return out.String(), nil
	case "users invite", "users clients", "users disconnect":
		err := executeUsers(ctx, store, c, &out)
		return out.String(), err
	case "mailbox connect", "mailbox device start", "mailbox device wait", "mailbox status", "mailbox disconnect":
		err := executeMailbox(ctx, store, c, &out)
		return out.String(), err
	case "backup":
		err := executeBackup(ctx, store, c, &out)
		return out.String(), err
	case "keys revoke":
		k, err := access.Of(store).RevokeKey(ctx, c.ID)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&out, "revoked %s (%s)\n", k.ID, k.Name)
		return out.String(), nil
	}
	return "", fmt.Errorf("unknown command %q", c.Name)
}
