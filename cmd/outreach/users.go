package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"outreach/oauth"
	"outreach/repo"
	"outreach/repo/access"
)

// users runs `outreach users invite|clients|disconnect`: the team members'
// local sign-in for OAuth, and the clients they connected.
func users(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: outreach users invite --email EMAIL [--name NAME] [--scopes read,write] | clients [--email EMAIL] | disconnect GRANT_ID")
	}
	fs := flag.NewFlagSet("users "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.flags(fs)
	email := fs.String("email", "", "the member's email (invite: created if new; clients: only theirs)")
	name := fs.String("name", "", "the member's name, when new (invite; default: the email's local part)")
	scopes := fs.String("scopes", "read,write", "what the member's role allows a client they approve: comma-separated read, write, admin (invite)")
	publicURL := fs.String("public-url", env("OUTREACH_PUBLIC_URL", "http://"+env("OUTREACH_ADDR", "127.0.0.1:8080")), "the service's public base URL, for the invite link (invite)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	c := command{Name: "users " + args[0], UserEmail: *email, KeyName: *name}
	switch args[0] {
	case "invite":
		if *email == "" {
			return errors.New("usage: outreach users invite --email EMAIL: the email is required")
		}
		base, err := oauth.CheckPublicURL(*publicURL)
		if err != nil {
			return fmt.Errorf("--public-url %w", err)
		}
		c.Scopes, c.PublicURL = strings.Split(*scopes, ","), base
	case "clients":
	case "disconnect":
		if fs.NArg() != 1 {
			return errors.New("usage: outreach users disconnect GRANT_ID (the id users clients lists)")
		}
		c.ID = fs.Arg(0)
	default:
		return fmt.Errorf("unknown users command %q: use invite, clients or disconnect", args[0])
	}
	return runCommand(ctx, cfg, c, stdout, stderr, zerolog.Nop())
}

// executeUsers runs a users command against the store.
func executeUsers(ctx context.Context, store *repo.Store, c command, out io.Writer) error {
	switch c.Name {
	case "users invite":
		u, token, err := access.Of(store).InviteMember(ctx, c.UserEmail, c.KeyName, c.Scopes)
		if err != nil {
			return err
		}
		si, err := access.Of(store).SignInOf(ctx, u.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Invite for %s (%s), allowed scopes %s; the link works once, for %s. Send it to them:\n\n    %s%s?token=%s\n\n",
			u.Name, u.Email, strings.Join(si.Scopes, ","), access.InviteTTL, c.PublicURL, oauth.PathInvite, url.QueryEscape(token))
		return nil
	case "users clients":
		userID := ""
		if c.UserEmail != "" {
			u, err := access.Of(store).UserByEmail(ctx, c.UserEmail)
			if err != nil {
				return err
			}
			userID = u.ID
		}
		gs, err := access.Of(store).ListOAuthGrants(ctx, userID)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(out)
		for _, g := range gs {
			enc.Encode(g)
		}
		return nil
	case "users disconnect":
		g, err := access.Of(store).OAuthGrant(ctx, c.ID)
		if err != nil {
			return err
		}
		if g.RevokedAt != nil {
			return fmt.Errorf("grant %s was already revoked at %s", g.ID, g.RevokedAt.Format(time.RFC3339))
		}
		if _, err := access.Of(store).RevokeOAuthGrant(ctx, g.ID, "revoked by an operator"); err != nil {
			return err
		}
		fmt.Fprintf(out, "disconnected %s (%s for user %s)\n", g.ID, g.ClientName, g.UserID)
		return nil
	}
	return fmt.Errorf("unknown command %q", c.Name)
}
