package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/backup"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/outbox"
	"outreach/server/version"
)

// backupCommand runs `outreach backup --to DIR` (through the running
// server, as keys are), `backup verify SOURCE` and `backup list DIR` (on
// the files alone).
func backupCommand(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer, log zerolog.Logger) error {
	sub := ""
	var err error
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("backup "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.flags(fs)
	to := fs.String("to", env("OUTREACH_BACKUP_TO", ""), "the target directory the backup is written under")
	withSecrets := fs.Bool("with-secrets", false, "also the data directory's key files, encrypted with the passphrase in OUTREACH_BACKUP_PASSPHRASE")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch sub {
	case "":
		if *to == "" {
			return errors.New("usage: outreach backup --to DIR (or OUTREACH_BACKUP_TO)")
		}
		c := command{Name: "backup", To: *to}
		if *withSecrets {
			if cfg.uri != "" {
				return errors.New("--with-secrets: the key files are the embedded store's data directory's; on MongoDB keep OUTREACH_MEDIA_SIGNING_KEY_FILE's file in your own secret store")
			}
			c.Passphrase = os.Getenv("OUTREACH_BACKUP_PASSPHRASE")
			if len(c.Passphrase) < backup.MinPassphrase {
				return fmt.Errorf("--with-secrets: set OUTREACH_BACKUP_PASSPHRASE to a passphrase of at least %d characters", backup.MinPassphrase)
			}
			if c.SecretsDir, err = filepath.Abs(cfg.data); err != nil {
				return err
			}
		}
		return runCommand(ctx, cfg, c, stdout, stderr, log)
	case "verify":
		if fs.NArg() != 1 {
			return errors.New("usage: outreach backup verify SOURCE (a backup, or a directory of backups)")
		}
		lines, err := backup.CheckAll(fs.Arg(0))
		for _, l := range lines {
			fmt.Fprintln(stdout, l)
		}
		return err
	case "list":
		dir := *to
		if fs.NArg() == 1 {
			dir = fs.Arg(0)
		}
		if dir == "" {
			return errors.New("usage: outreach backup list DIR")
		}
		list, err := backup.List(dir)
		if err != nil {
			return err
		}
		for _, e := range list {
			state := "complete"
			if !e.Complete {
				state = "unfinished"
			}
			fmt.Fprintf(stdout, "%s\tcounter %d\t%s\t%s\n", e.Dir, e.Counter, e.FixedAt.Format(time.RFC3339), state)
		}
		segs, err := backup.Segments(dir)
		if err != nil {
			return err
		}
		if n := len(segs); n > 0 {
			fmt.Fprintf(stdout, "changes shipped after counter %d up to %d in %d segments, the last written up to %s\n",
				segs[0].After, segs[n-1].Upto, n, segs[n-1].LastAt.Format(time.RFC3339))
		}
		return nil
	}
	return fmt.Errorf("unknown backup command %q: use backup --to DIR, backup verify SOURCE or backup list DIR", sub)
}

// executeBackup takes a backup of store (the command socket's side).
func executeBackup(ctx context.Context, store *repo.Store, c command, out io.Writer) error {
	opts := backup.Options{ServiceVersion: version.Version}
	if c.Passphrase != "" {
		opts.Secrets = &backup.Secrets{Dir: c.SecretsDir, Passphrase: c.Passphrase}
	}
	m, err := backup.Create(ctx, store.Engine, c.To, opts)
	if err != nil {
		return err
	}
	var docs int64
	for _, c := range m.Collections {
		docs += c.Count
	}
	fmt.Fprintf(out, "backup at counter %d: %d collections, %d documents, writes paused %.1f ms, took %s\n",
		m.Counter, len(m.Collections), docs, m.WritesPausedMS, m.FinishedAt.Sub(m.FixedAt).Round(time.Millisecond))
	if len(m.Secrets) > 0 {
		fmt.Fprintf(out, "key files encrypted in %s: %s\n", backup.SecretsFile, strings.Join(m.Secrets, ", "))
	}
	return nil
}

// restoreCommand runs `outreach restore SOURCE [--counter N | --until
// TIME]` into the empty store the configuration names. It opens that store
// itself: a server serving it would hold the data directory's lock.
func restoreCommand(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer, log zerolog.Logger) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.flags(fs)
	counter := fs.Int64("counter", 0, "restore the store as it stood at this change counter")
	until := fs.String("until", "", "restore the store as it stood at this time (RFC 3339, e.g. 2026-11-28T09:30:00Z)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	withSecrets := fs.Bool("with-secrets", false, "also restore the key files of a backup taken --with-secrets into --data, decrypted with OUTREACH_BACKUP_PASSPHRASE")
	var source string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		source, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if source == "" && fs.NArg() == 1 {
		source = fs.Arg(0)
	}
	if source == "" {
		return errors.New("usage: outreach restore SOURCE [--counter N | --until TIME] [--data DIR]")
	}
	var t backup.Target
	if *counter < 0 {
		return fmt.Errorf("--counter %d: want a positive change counter", *counter)
	}
	t.Counter = *counter
	if *until != "" {
		if t.Counter > 0 {
			return errors.New("--counter and --until: give one")
		}
		u, err := time.Parse(time.RFC3339Nano, *until)
		if err != nil {
			return fmt.Errorf("--until %q: want a time in RFC 3339, e.g. 2026-11-28T09:30:00Z", *until)
		}
		t.Until = u
	}
	var keys backup.KeyFiles
	if *withSecrets {
		// The passphrase is checked before the store is touched.
		pass := os.Getenv("OUTREACH_BACKUP_PASSPHRASE")
		if pass == "" {
			return errors.New("--with-secrets: set OUTREACH_BACKUP_PASSPHRASE to the backup's passphrase")
		}
		dir, _, err := backup.Plan(source, t)
		if err != nil {
			return err
		}
		if keys, err = backup.OpenSecrets(dir, pass); err != nil {
			return err
		}
	}
	// The restore's writes keep the service's indexes; once the store is
	// verified the restore writes their checkpoint, which the next start
	// loads (ledger's CompleteRestore).
	store, closeStore, err := open(ctx, cfg, false, stderr, log)
	if err != nil {
		return err
	}
	defer closeStore()
	res, err := backup.Restore(ctx, store.Engine, source, t)
	if err != nil {
		return err
	}
	if keys != nil {
		// After the restore: its own start made a signing key, which this replaces.
		names, err := keys.WriteTo(cfg.data)
		if err != nil {
			return fmt.Errorf("the store is restored, but its key files are not: %w", err)
		}
		fmt.Fprintf(stderr, "key files restored into %s: %s\n", cfg.data, strings.Join(names, ", "))
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	var docs int64
	for _, n := range res.Documents {
		docs += n
	}
	fmt.Fprintf(stdout, "restored %s: %d documents at counter %d, %d shipped changes replayed, now at counter %d; verify: clean\n",
		res.Backup, docs, res.Base, res.Replayed, res.Counter)
	fmt.Fprintf(stdout, "took: check %v, documents %v, changes and indexes %v, verify %v\n", res.Took.Check.Round(time.Millisecond),
		res.Took.Documents.Round(time.Millisecond), res.Took.Replay.Round(time.Millisecond), res.Took.Verify.Round(time.Millisecond))
	return nil
}

// startBackups runs the backup schedule of serve --backup-to in the
// background: backups every --backup-every, the changes after the last
// shipped every minute (sooner after 1,000 changes), --backup-keep kept.
func startBackups(ctx context.Context, store *repo.Store, cfg config, log zerolog.Logger) *backup.Scheduler {
	sched := backup.NewScheduler(store.Engine, backup.Schedule{To: cfg.backupTo, Every: cfg.backupEvery,
		Retention: backup.Retention{Keep: cfg.backupKeep, KeepDaily: cfg.backupDaily, KeepWeekly: cfg.backupWeekly},
		Options:   backup.Options{ServiceVersion: version.Version},
		Notify:    func(ctx context.Context, a backup.Alert) { notifyBackupAlert(ctx, store, a, log) }}, log)
	log.Info().Str("to", cfg.backupTo).Str("every", cfg.backupEvery.String()).Int("keep", cfg.backupKeep).
		Int("keep_daily", cfg.backupDaily).Int("keep_weekly", cfg.backupWeekly).Msg("backups scheduled")
	go sched.Run(ctx)
	return sched
}

// notifyBackupAlert tells the admins that the backup target fails, or
// works again, as a notification delivered like any other (Slack, the
// webhook); once per streak of failures.
func notifyBackupAlert(ctx context.Context, store *repo.Store, a backup.Alert, log zerolog.Logger) {
	ctx = audit.WithActor(ctx, repo.SystemActor("backup"))
	kind, text := outbox.EventBackupRecovered, fmt.Sprintf("backups to %s work again, after %d failures since %s",
		a.Target, a.Failures, a.Since.Format(time.RFC3339))
	if a.Failing {
		kind, text = outbox.EventBackupFailing, fmt.Sprintf("backups to %s are failing: %d failures since %s, the last: %s; retried with backoff, writes go on",
			a.Target, a.Failures, a.Since.Format(time.RFC3339), a.Error)
	}
	data := map[string]any{"target": a.Target, "failures": a.Failures, "since": a.Since, "error": a.Error}
	if _, err := outbox.Of(store).NotifyAdmins(ctx, kind, "backups", text, data, "backup/"+a.Target+"/"+a.Since.Format(time.RFC3339Nano)); err != nil {
		log.Warn().Err(err).Str("event", kind).Msg("backup: notifying the admins failed")
	}
}

// upgradeBackup is what a start does before it upgrades a store of an
// older format: a backup into the configured target, else into
// DATA/backups on the embedded store; on MongoDB without a target it
// refuses, unless --no-upgrade-backup says to go on without one. It logs
// and prints to notice one line naming the backup and both formats.
func upgradeBackup(cfg config, notice io.Writer, log zerolog.Logger) ledger.Upgrade {
	return func(ctx context.Context, eng *ledger.Engine, from, to int) error {
		if cfg.noUpgradeBackup {
			log.Warn().Int("from", from).Int("to", to).Msg("store format upgrade without a backup (--no-upgrade-backup)")
			fmt.Fprintf(notice, "upgrading the store from format %d to %d without a backup (--no-upgrade-backup)\n", from, to)
			return nil
		}
		target := cfg.backupTo
		if target == "" && cfg.uri == "" && cfg.data != "" {
			target = filepath.Join(cfg.data, "backups")
		}
		if target == "" {
			return fmt.Errorf("the store is in format %d, this binary writes format %d, and a start that upgrades it takes a backup first: "+
				"set a backup target (--backup-to or OUTREACH_BACKUP_TO), or pass --no-upgrade-backup (OUTREACH_NO_UPGRADE_BACKUP=true) to upgrade without one", from, to)
		}
		m, err := backup.Create(ctx, eng, target, backup.Options{ServiceVersion: version.Version})
		if err != nil {
			return fmt.Errorf("the backup before the upgrade, into %s: %w", target, err)
		}
		dir := m.DirIn(target)
		log.Info().Str("backup", dir).Int("from", from).Int("to", to).Int64("counter", m.Counter).Msg("store format upgrade: backup taken first")
		fmt.Fprintf(notice, "upgrading the store from format %d to %d: backup taken first into %s (counter %d)\n", from, to, dir, m.Counter)
		return nil
	}
}
